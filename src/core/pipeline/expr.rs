//! The condition language of pipelines (docs/cli.md): `==`/`===`, `!=`/`!==`, `<`,
//! `<=`, `>`, `>=`, `&&`, `||`, `!`, parentheses, numbers, strings, `true`/`false`,
//! `$name.field`, `$name[0]`, `.length`. Nothing else is evaluated: an expression is
//! parsed into a tree once, then evaluated against the pipeline's variables.

use std::collections::HashMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Value),
    /// `$name` followed by `.field`, `[index]` and `.length` accessors.
    Var(String, Vec<Access>),
    Not(Box<Expr>),
    Bin(Box<Expr>, Op, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    Field(String),
    Index(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Bool(bool),
    Var(String),
    Dot(String),
    Index(usize),
    Op(Op),
    Not,
    Open,
    Close,
}

/// What is wrong with a condition, or why it cannot be evaluated; each names the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionError {
    #[error("`$` at {at} must be followed by a variable name")]
    DollarWithoutName { at: usize },
    #[error("`{word}` is not allowed; variables start with `$`")]
    BareWord { word: String },
    #[error("`{found}` is not part of the condition language")]
    NotInLanguage { found: char },
    #[error("`[` at {at} must hold a number and close with `]`")]
    BadIndex { at: usize },
    #[error("index too large")]
    IndexTooLarge,
    #[error("a string is not closed")]
    UnclosedString,
    #[error("{text:?} is not a number")]
    NotANumber { text: String },
    #[error("`!` and parentheses nest more than {MAX_NESTING} deep; simplify the condition")]
    TooDeep,
    #[error("a `(` is not closed")]
    UnclosedParen,
    #[error("unexpected {found}")]
    Unexpected { found: String },
    #[error("the condition ends too early")]
    EndsEarly,
    #[error("the condition is {len} bytes long; at most {MAX_CONDITION_LEN} are allowed")]
    TooLong { len: usize },
    #[error("unexpected {found} after a complete condition")]
    Trailing { found: String },
    #[error("${name} is not set")]
    NotSet { name: String },
}

fn tokenize(src: &str) -> Result<Vec<Tok>, ConditionError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let next2 = chars.get(i + 2).copied();
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            '=' if next == Some('=') => {
                out.push(Tok::Op(Op::Eq));
                i += if next2 == Some('=') { 3 } else { 2 };
            }
            '!' if next == Some('=') => {
                out.push(Tok::Op(Op::Ne));
                i += if next2 == Some('=') { 3 } else { 2 };
            }
            '!' => {
                out.push(Tok::Not);
                i += 1;
            }
            '<' | '>' => {
                let eq = next == Some('=');
                out.push(Tok::Op(match (c, eq) {
                    ('<', false) => Op::Lt,
                    ('<', true) => Op::Le,
                    ('>', false) => Op::Gt,
                    _ => Op::Ge,
                }));
                i += if eq { 2 } else { 1 };
            }
            '&' if next == Some('&') => {
                out.push(Tok::Op(Op::And));
                i += 2;
            }
            '|' if next == Some('|') => {
                out.push(Tok::Op(Op::Or));
                i += 2;
            }
            '$' => {
                i += 1;
                let name = ident(&mut i);
                if name.is_empty() {
                    return Err(ConditionError::DollarWithoutName { at: i });
                }
                out.push(Tok::Var(name));
            }
            '.' if next.is_some_and(|n| n.is_alphabetic() || n == '_') => {
                i += 1;
                out.push(Tok::Dot(ident(&mut i)));
            }
            '[' => {
                let (index, after) = index_token(&chars, i + 1)?;
                out.push(Tok::Index(index));
                i = after;
            }
            '"' | '\'' => {
                let (text, after) = string_token(&chars, i)?;
                out.push(Tok::Str(text));
                i = after;
            }
            c if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit())) => {
                let (n, after) = number_token(&chars, i)?;
                out.push(Tok::Num(n));
                i = after;
            }
            c if c.is_alphabetic() => {
                let word = ident(&mut i);
                match word.as_str() {
                    "true" => out.push(Tok::Bool(true)),
                    "false" => out.push(Tok::Bool(false)),
                    _ => return Err(ConditionError::BareWord { word }),
                }
            }
            other => return Err(ConditionError::NotInLanguage { found: other }),
        }
    }
    Ok(out)
}

/// `[N]` from just after its `[`: the index and where the token ends.
fn index_token(chars: &[char], mut i: usize) -> Result<(usize, usize), ConditionError> {
    let start = i;
    while i < chars.len() && chars[i].is_ascii_digit() {
        i += 1;
    }
    let n: String = chars[start..i].iter().collect();
    if chars.get(i) != Some(&']') || n.is_empty() {
        return Err(ConditionError::BadIndex { at: start });
    }
    let index = n.parse().map_err(|_| ConditionError::IndexTooLarge)?;
    Ok((index, i + 1))
}

/// A quoted string from its opening quote (`\n`, `\t` and `\<char>` escapes): the
/// text and where the token ends.
fn string_token(chars: &[char], mut i: usize) -> Result<(String, usize), ConditionError> {
    let quote = chars[i];
    i += 1;
    let mut s = String::new();
    loop {
        match chars.get(i) {
            None => return Err(ConditionError::UnclosedString),
            Some('\\') => {
                if let Some(e) = chars.get(i + 1) {
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        other => *other,
                    });
                }
                i += 2;
            }
            Some(ch) if *ch == quote => return Ok((s, i + 1)),
            Some(ch) => {
                s.push(*ch);
                i += 1;
            }
        }
    }
}

/// A number (maybe negative, maybe with a fraction): its value and where it ends.
fn number_token(chars: &[char], mut i: usize) -> Result<(f64, usize), ConditionError> {
    let start = i;
    i += 1;
    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
        i += 1;
    }
    let n: String = chars[start..i].iter().collect();
    let value = n
        .parse()
        .map_err(|_| ConditionError::NotANumber { text: n.clone() })?;
    Ok((value, i))
}

/// The longest condition accepted, in bytes: a definition is data from the project,
/// and a condition is parsed and evaluated by recursion.
pub const MAX_CONDITION_LEN: usize = 4096;
/// How deep `!` and parentheses may nest.
pub const MAX_NESTING: usize = 64;

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// `!` and `(` levels open at the current token.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn binary(&mut self, level: u8) -> Result<Expr, ConditionError> {
        if level == 3 {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        while let Some(Tok::Op(op)) = self.peek().cloned() {
            let op_level = match op {
                Op::Or => 0,
                Op::And => 1,
                _ => 2,
            };
            if op_level != level {
                break;
            }
            self.pos += 1;
            let right = self.binary(level + 1)?;
            left = Expr::Bin(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn deeper(&mut self) -> Result<(), ConditionError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(ConditionError::TooDeep);
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Expr, ConditionError> {
        match self.next() {
            Some(Tok::Not) => {
                self.deeper()?;
                let e = Expr::Not(Box::new(self.unary()?));
                self.depth -= 1;
                Ok(e)
            }
            Some(Tok::Open) => {
                self.deeper()?;
                let e = self.binary(0)?;
                self.depth -= 1;
                match self.next() {
                    Some(Tok::Close) => Ok(self.accessors(e)),
                    _ => Err(ConditionError::UnclosedParen),
                }
            }
            Some(Tok::Num(n)) => Ok(Expr::Lit(serde_json::json!(n))),
            Some(Tok::Str(s)) => Ok(Expr::Lit(Value::String(s))),
            Some(Tok::Bool(b)) => Ok(Expr::Lit(Value::Bool(b))),
            Some(Tok::Var(name)) => Ok(self.accessors(Expr::Var(name, Vec::new()))),
            Some(other) => Err(ConditionError::Unexpected {
                found: format!("{other:?}"),
            }),
            None => Err(ConditionError::EndsEarly),
        }
    }

    fn accessors(&mut self, e: Expr) -> Expr {
        let Expr::Var(name, mut path) = e else {
            return e;
        };
        loop {
            match self.peek() {
                Some(Tok::Dot(f)) => path.push(Access::Field(f.clone())),
                Some(Tok::Index(i)) => path.push(Access::Index(*i)),
                _ => break,
            }
            self.pos += 1;
        }
        Expr::Var(name, path)
    }
}

/// Parses a condition; the error says what is wrong.
pub fn parse(src: &str) -> Result<Expr, ConditionError> {
    if src.len() > MAX_CONDITION_LEN {
        return Err(ConditionError::TooLong { len: src.len() });
    }
    let mut p = Parser {
        toks: tokenize(src)?,
        pos: 0,
        depth: 0,
    };
    let e = p.binary(0)?;
    if p.pos < p.toks.len() {
        return Err(ConditionError::Trailing {
            found: format!("{:?}", p.toks[p.pos]),
        });
    }
    Ok(e)
}

/// Looks a variable path up; `.length` of a string or array is its length.
pub fn lookup(
    vars: &HashMap<String, Value>,
    name: &str,
    path: &[Access],
) -> Result<Value, ConditionError> {
    let mut v = vars
        .get(name)
        .ok_or_else(|| ConditionError::NotSet {
            name: name.to_owned(),
        })?
        .clone();
    for a in path {
        v = match (a, &v) {
            (Access::Field(f), Value::Object(m)) => m.get(f).cloned().unwrap_or(Value::Null),
            (Access::Field(f), Value::Array(items)) if f == "length" => {
                serde_json::json!(items.len())
            }
            (Access::Field(f), Value::String(s)) if f == "length" => {
                serde_json::json!(s.chars().count())
            }
            (Access::Index(i), Value::Array(items)) => {
                items.get(*i).cloned().unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
    }
    Ok(v)
}

/// Evaluates to a JSON value; a reference to a missing variable is an error.
#[allow(clippy::many_single_char_names)] // operands and their numbers: a, b, x, y
pub fn eval(e: &Expr, vars: &HashMap<String, Value>) -> Result<Value, ConditionError> {
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Var(name, path) => lookup(vars, name, path)?,
        Expr::Not(inner) => Value::Bool(!truthy(&eval(inner, vars)?)),
        Expr::Bin(l, Op::And, r) => Value::Bool(truthy(&eval(l, vars)?) && truthy(&eval(r, vars)?)),
        Expr::Bin(l, Op::Or, r) => Value::Bool(truthy(&eval(l, vars)?) || truthy(&eval(r, vars)?)),
        Expr::Bin(l, op, r) => {
            let (a, b) = (eval(l, vars)?, eval(r, vars)?);
            Value::Bool(match op {
                Op::Eq => same(&a, &b),
                Op::Ne => !same(&a, &b),
                _ => match (a.as_f64(), b.as_f64(), a.as_str(), b.as_str()) {
                    (Some(x), Some(y), _, _) => compare(*op, x.partial_cmp(&y)),
                    (_, _, Some(x), Some(y)) => compare(*op, Some(x.cmp(y))),
                    _ => false,
                },
            })
        }
    })
}

pub fn eval_bool(e: &Expr, vars: &HashMap<String, Value>) -> Result<bool, ConditionError> {
    eval(e, vars).map(|v| truthy(&v))
}

fn compare(op: Op, ord: Option<std::cmp::Ordering>) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    matches!(
        (op, ord),
        (Op::Lt, Some(Less))
            | (Op::Le, Some(Less | Equal))
            | (Op::Gt, Some(Greater))
            | (Op::Ge, Some(Greater | Equal))
    )
}

/// Numbers compare by value (0 == 0.0); everything else structurally.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() < f64::EPSILON,
        _ => a == b,
    }
}

/// JavaScript's truthiness, as the seed's conditions assume.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> HashMap<String, Value> {
        HashMap::from([
            (
                "build".to_owned(),
                json!({"exitCode": 0, "lines": ["a", "b"], "stdout": "ok"}),
            ),
            ("tests".to_owned(), json!({"failed": 3, "names": ["x"]})),
            ("flag".to_owned(), json!(true)),
        ])
    }

    fn check(src: &str) -> bool {
        eval_bool(&parse(src).unwrap(), &vars()).unwrap()
    }

    #[test]
    fn deep_and_long_conditions_are_refused_not_crashed_on() {
        let deep = format!("{}true", "!".repeat(500_000));
        assert!(
            parse(&deep)
                .unwrap_err()
                .to_string()
                .contains("at most 4096")
        );
        let nested = format!("{}true", "!".repeat(MAX_NESTING + 1));
        assert!(
            parse(&nested)
                .unwrap_err()
                .to_string()
                .contains("nest more than 64")
        );
        let parens = format!("{}true{}", "(".repeat(100), ")".repeat(100));
        assert!(parse(&parens).is_err());
        assert!(parse(&format!("{}true", "!".repeat(MAX_NESTING))).is_ok());
        let long_chain = vec!["true"; 400].join(" && ");
        assert!(parse(&long_chain).is_ok());
    }

    #[test]
    fn the_documented_operators() {
        let table = [
            ("$build.exitCode === 0", true),
            ("$build.exitCode == 0", true),
            ("$build.exitCode !== 0", false),
            ("$build.exitCode != 1", true),
            ("$tests.failed > 2 && $tests.failed <= 3", true),
            ("$tests.failed < 3 || $tests.failed >= 4", false),
            ("!($build.exitCode == 0)", false),
            ("$build.lines.length == 2", true),
            ("$build.lines[1] == 'b'", true),
            ("$tests.names[0] === \"x\"", true),
            ("$build.stdout.length > 1", true),
            ("$flag", true),
            ("!$flag || false", false),
            ("$build.missing == 0", false),
            ("1 < 2 && 'a' < 'b'", true),
        ];
        for (src, expected) in table {
            assert_eq!(check(src), expected, "{src}");
        }
    }

    #[test]
    fn nothing_else_is_evaluated() {
        for bad in [
            "process.exit(1)",
            "$a = 1",
            "$a + 1",
            "`x`",
            "(1 == 1",
            "1 ==",
            "$",
            "$a[x]",
            "a.b",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = parse("$nope.x == 1").unwrap();
        assert!(eval(&e, &vars()).unwrap_err().to_string().contains("$nope"));
    }
}
