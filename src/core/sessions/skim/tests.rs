use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;
use crate::core::sessions::prices::PriceTable;
use crate::core::sessions::tally::Tally;

/// The first line of the real Claude Code 2.1.328's transcript (a fixture) that `is`.
fn fixture_line(is: impl Fn(&str) -> bool) -> String {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/fixtures/claude-2.1.328/subagent/project/304bb5cb-3950-4dfe-a395-ea7fe3afe9fb.jsonl",
    );
    let text = std::fs::read_to_string(fixture).expect("fixture");
    text.lines()
        .find(|l| is(l))
        .expect("a line of that kind")
        .to_owned()
}

/// A tool-results line of the real Claude Code 2.1.328 (its fixture), and the same
/// with an error result: its text kept.
#[test]
fn a_real_tool_result_line_is_skimmed_and_an_error_is_not() {
    let line =
        fixture_line(|l| l.contains(r#""type":"tool_result""#) && l.contains("toolUseResult"));
    let line = line.as_str();
    let got = tool_results(line.as_bytes()).expect("skimmed");
    assert_eq!(got.results, [("toolu_0001", None)]);
    assert!(!got.sidechain);
    assert_eq!(got.timestamp, Some("2026-11-25T09:13:15.895Z"));
    let error = line.replacen(
        r#""type":"tool_result","#,
        r#""type":"tool_result","is_error":true,"#,
        1,
    );
    let got = tool_results(error.as_bytes()).expect("skimmed");
    let v: Value = serde_json::from_str(&error).expect("json");
    let content = v["message"]["content"][0]["content"].to_string();
    assert_eq!(got.results, [("toolu_0001", Some(content.as_str()))]);
}

/// The tool's own copy is not walked once the line's head and results are read (a
/// damage there goes unseen, as ccusage does not see it); before them it still is.
#[test]
fn a_tool_results_line_is_read_up_to_the_tools_own_copy() {
    let head = r#"{"parentUuid":"p1","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"ok"}]},"timestamp":"2026-11-25T09:13:15.895Z","#;
    let damaged = format!(r#"{head}"toolUseResult":{{"file":"cut sh"#);
    let got = tool_results(damaged.as_bytes()).expect("read up to the copy");
    assert_eq!(got.results, [("t1", None)]);
    assert_eq!(got.timestamp, Some("2026-11-25T09:13:15.895Z"));
    let no_time = damaged.replace(r#""timestamp":"2026-11-25T09:13:15.895Z","#, "");
    assert_eq!(
        tool_results(no_time.as_bytes()),
        None,
        "the time may follow: walked"
    );
}

/// Text a tool returns may hold every marker; serialized, their quotes are escaped.
fn hostile_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[ -~]{0,12}",
        "\\PC{0,6}",
        prop::sample::select(vec![
            r#""tool_use_id":"t1""#,
            r#""isSidechain":true"#,
            r#""timestamp":"2026-01-01T00:00:00Z""#,
            r#""type":"user""#,
            r#""type":"tool_result""#,
            r#""toolUseResult":"#,
            r#""is_error":true"#,
            r#""assistant""#,
            "compact_boundary",
            "\\",
            "\"",
            "\n",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|v| v.concat())
}

/// Any JSON, its keys often the ones the skim looks for (a tool's own output).
fn nested() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "tool_use_id",
        "timestamp",
        "type",
        "isSidechain",
        "is_error",
        "content",
        "toolUseResult",
        "file",
    ]);
    let leaf = prop_oneof![
        hostile_text().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec!["user", "tool_result", "assistant", "t1", "t2"])
            .prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(3, 16, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec((key.clone(), inner), 0..4).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

const IDS: [&str; 4] = ["t1", "t2", "t3", "t4"];

fn result_block() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            4 => prop::sample::select(IDS.to_vec()).prop_map(Value::from),
            1 => nested(),
        ],
        prop_oneof![8 => Just("tool_result"), 1 => Just("text")],
        prop_oneof![
            hostile_text().prop_map(Value::from),
            hostile_text().prop_map(|t| json!([{"type": "text", "text": t}])),
            nested(),
        ],
        prop::option::of(any::<bool>()),
        any::<bool>(),
    )
        .prop_map(|(id, kind, content, error, id_first)| {
            let mut b = Map::new();
            if id_first {
                b.insert("tool_use_id".into(), id.clone());
            }
            b.insert("type".into(), kind.into());
            b.insert("content".into(), content);
            if let Some(e) = error {
                b.insert("is_error".into(), e.into());
            }
            if !id_first {
                b.insert("tool_use_id".into(), id);
            }
            Value::Object(b)
        })
}

/// A `user` line of tool results as Claude Code writes it, or with its keys in
/// another order, some missing, another type, a tool's copy holding the markers.
fn results_line() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(
            prop_oneof![
                8 => result_block(),
                1 => hostile_text().prop_map(Value::from),
                1 => result_block().prop_map(|b| json!([b])),
            ],
            1..4,
        ),
        prop::option::of(any::<bool>()),
        prop::option::of(prop::sample::select(vec![
            "2026-11-25T09:13:15.895Z",
            "2026-11-25T09:14:00.000Z",
        ])),
        prop::option::of(nested()),
        prop_oneof![6 => Just("user"), 1 => Just("assistant"), 1 => Just("system")],
        any::<bool>(),
    )
        .prop_map(|(blocks, side, ts, copy, kind, shuffled)| {
            let mut fields: Vec<(&str, Value)> = vec![("parentUuid", json!("p1"))];
            if let Some(s) = side {
                fields.push(("isSidechain", s.into()));
            }
            fields.push(("type", kind.into()));
            fields.push(("message", json!({"role": "user", "content": blocks})));
            if let Some(t) = ts {
                fields.push(("timestamp", t.into()));
            }
            if let Some(c) = copy {
                fields.push(("toolUseResult", c));
            }
            fields.push(("cwd", json!("/p")));
            fields.push(("sessionId", json!("s1")));
            if shuffled {
                fields.reverse();
            }
            let map: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.into(), v)).collect();
            Value::Object(map).to_string()
        })
}

/// A response calling tools (so that results have calls to answer).
fn calls_line() -> impl Strategy<Value = String> {
    (prop::sample::subsequence(IDS.to_vec(), 1..3), any::<u16>()).prop_map(|(ids, n)| {
        let calls: Vec<Value> = ids
            .iter()
            .map(|id| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}))
            .collect();
        json!({"type": "assistant", "isSidechain": false, "timestamp": "2026-11-25T09:13:15.000Z",
               "requestId": format!("r{n}"), "sessionId": "s1", "cwd": "/p",
               "message": {"id": format!("m{n}"), "model": "claude-sonnet-4-5", "content": calls,
                           "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 1}}})
        .to_string()
    })
}

/// A response of the real Claude Code 2.1.328 (its fixture) is skimmed to the figures
/// the full parse finds; the same as an API error is not skimmed.
#[test]
fn a_real_response_line_is_skimmed_and_an_api_error_is_not() {
    let line = fixture_line(|l| l.contains(r#""type":"assistant""#) && l.contains(r#""usage""#));
    let line = line.as_str();
    let got = response(line.as_bytes()).expect("skimmed");
    let v: Value = serde_json::from_str(line).expect("json");
    let usage = &v["message"]["usage"];
    let tokens = got.usage.expect("usage");
    assert_eq!(Some(tokens.input), usage["input_tokens"].as_u64());
    assert_eq!(Some(tokens.output), usage["output_tokens"].as_u64());
    assert_eq!(got.id, v["message"]["id"].as_str());
    assert_eq!(got.request_id, v["requestId"].as_str());
    assert_eq!(got.timestamp, v["timestamp"].as_str());
    let error = line.replacen(
        r#""type":"assistant""#,
        r#""type":"assistant","isApiErrorMessage":true"#,
        1,
    );
    assert_eq!(response(error.as_bytes()), None);
}

/// A JSON value as text, or one of the texts that look like a count and are not.
fn raw_value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop_oneof![Just(0u64), 1u64..100_000, Just(u64::MAX)].prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec![
            "null", "1.0", "-1", "-0", "01", "1e3", "18446744073709551616", "\"5\"", "true", "[]", "{}",
        ])
        .prop_map(str::to_owned),
        1 => nested().prop_map(|v| v.to_string()),
    ]
}

/// An object as text from (key, value as text) pairs: a key may come twice.
fn object_text(fields: &[(String, String)]) -> String {
    let members: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
        .collect();
    format!("{{{}}}", members.join(","))
}

fn usage_text() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "service_tier",
    ]);
    let one_hour = prop_oneof![
        raw_value().prop_map(|v| format!(
            r#"{{"ephemeral_1h_input_tokens":{v},"ephemeral_5m_input_tokens":3}}"#
        )),
        Just("null".to_owned()),
    ];
    (
        prop::collection::vec((key, raw_value()), 0..6),
        prop::option::of(one_hour),
    )
        .prop_map(|(fields, one_hour)| {
            let mut fields: Vec<(String, String)> =
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(h) = one_hour {
                fields.push(("cache_creation".into(), h));
            }
            object_text(&fields)
        })
}

fn plain_or_not() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        r#""m1""#,
        r#""m2""#,
        r#""claude-sonnet-4-5""#,
        r#""<synthetic>""#,
        r#""gpt-9""#,
        "null",
        "7",
        r#""m\u0031""#,
        r#""end_turn""#,
        r#""tool_use""#,
    ])
    .prop_map(str::to_owned)
}

fn message_text() -> impl Strategy<Value = String> {
    let content = prop_oneof![
        calls_content().prop_map(|v| v.to_string()),
        hostile_text().prop_map(|t| json!([{"type": "text", "text": t}]).to_string()),
        hostile_text().prop_map(|t| Value::from(t).to_string()),
        nested().prop_map(|v| v.to_string()),
        Just("null".to_owned()),
    ];
    let key = prop::sample::select(vec!["id", "model", "stop_reason", "role", "type"]);
    (
        prop::collection::vec((key, plain_or_not()), 0..5),
        prop::option::of(content),
        prop_oneof![4 => usage_text(), 1 => Just("null".to_owned()), 1 => raw_value()],
        any::<bool>(),
    )
        .prop_map(|(fields, content, usage, usage_first)| {
            let mut fields: Vec<(String, String)> =
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(c) = content {
                fields.push(("content".into(), c));
            }
            let at = if usage_first { 0 } else { fields.len() };
            fields.insert(at, ("usage".into(), usage));
            object_text(&fields)
        })
}

fn calls_content() -> impl Strategy<Value = Value> {
    prop::sample::subsequence(IDS.to_vec(), 1..3).prop_map(|ids| {
        ids.iter()
            .map(|id| json!({"type": "tool_use", "id": id, "name": "Write", "input": {"file_path": "/p/a.rs", "content": "fn main() {\n}\n"}}))
            .collect()
    })
}

/// A response line in the shapes Claude Code writes and in others: fields in any
/// order or twice, values of other types, counts that are not plain numbers.
fn response_line() -> impl Strategy<Value = String> {
    let top = prop::sample::select(vec![
        "timestamp",
        "isSidechain",
        "requestId",
        "isApiErrorMessage",
        "agentId",
        "subtype",
        "sessionId",
        "cwd",
        "parentUuid",
    ]);
    let top_value = prop_oneof![
        6 => prop::sample::select(vec![
            r#""2026-11-25T09:13:15.000Z""#, r#""2026-11-25T09:20:00.000Z""#, "true", "false",
            "null", r#""r1""#, r#""r2""#, r#""s1""#, r#""/p""#, "3", r#""r\u0032""#,
        ])
        .prop_map(str::to_owned),
        1 => nested().prop_map(|v| v.to_string()),
    ];
    (
        prop::collection::vec((top, top_value), 0..7),
        message_text(),
        prop_oneof![8 => Just(r#""assistant""#), 1 => Just(r#""user""#), 1 => Just("null")],
        0..4usize,
        0..4usize,
    )
        .prop_map(|(fields, message, kind, message_at, kind_at)| {
            let mut fields: Vec<(String, String)> =
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            fields.insert(message_at.min(fields.len()), ("message".into(), message));
            fields.insert(kind_at.min(fields.len()), ("type".into(), kind.to_owned()));
            object_text(&fields)
        })
}

/// A line cut short by a writer that died, alone or with the next line run into it.
fn damaged() -> impl Strategy<Value = String> {
    (
        response_line(),
        response_line(),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(first, second, cut, joined)| {
            let mut at = cut.index(first.len().max(1));
            while !first.is_char_boundary(at) {
                at -= 1;
            }
            if joined {
                format!("{}{second}", &first[..at])
            } else {
                first[..at].to_owned()
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// The skim and the full parse leave the same tally, line after line: responses,
    /// tool results and the calls they answer, whole or damaged.
    #[test]
    fn the_skim_and_the_full_parse_agree(
        lines in prop::collection::vec(
            prop_oneof![4 => response_line(), 3 => results_line(), 1 => calls_line(), 1 => damaged()],
            1..10,
        )
    ) {
        let prices = PriceTable::default();
        let (mut skimmed, mut parsed) = (Tally::new(), Tally::new());
        let first = r#"{"type":"user","sessionId":"s1","cwd":"/p","timestamp":"2026-11-25T09:13:00.000Z","isSidechain":false,"message":{"role":"user","content":"/musician task-01"}}"#;
        for line in std::iter::once(first.to_owned()).chain(lines) {
            skimmed.feed_bytes(line.as_bytes(), &prices);
            parsed.feed_parsed(line.as_bytes(), &prices);
            prop_assert_eq!(&skimmed, &parsed, "after {}", line);
        }
    }
}
