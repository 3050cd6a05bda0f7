//! API list prices per model family (USD per million tokens), as docs/sessions.md lists
//! them. A cost is an estimate at these list prices, which subscription users do not
//! pay: every figure says which table it used.

use serde::Serialize;

/// Tokens of one response, or a sum of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    /// Cache writes (`cache_creation_input_tokens`, 5-minute and 1-hour together).
    pub cache_write: u64,
    pub cache_read: u64,
    /// Of `cache_write`, those written for an hour (billed at twice the input price).
    #[serde(skip)]
    pub cache_write_1h: u64,
}

impl Tokens {
    /// Saturating: a transcript is anyone's text, and a count near `u64::MAX` must
    /// not wrap a sum around (nor panic).
    pub fn add(&mut self, other: &Tokens) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write_1h = self.cache_write_1h.saturating_add(other.cache_write_1h);
    }

    /// The four counts added up.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_write)
            .saturating_add(self.cache_read)
    }

    /// What the prompt held: input, cache writes and cache reads.
    pub fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_write)
            .saturating_add(self.cache_read)
    }
}

/// One model family's prices, per million tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Price {
    /// A model id that starts with this takes these prices (the longest match wins).
    pub prefix: String,
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}

/// The table in force, and its name (said beside every cost).
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    pub name: String,
    pub prices: Vec<Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        let p = |prefix: &str, input, output, cache_write, cache_read| Price {
            prefix: prefix.to_owned(),
            input,
            output,
            cache_write,
            cache_read,
        };
        Self {
            name: "Anthropic API list prices, USD per million tokens (docs/sessions.md, 2026-11)"
                .into(),
            prices: vec![
                p("claude-opus-4-5", 5.0, 25.0, 6.25, 0.50),
                p("claude-opus-4", 15.0, 75.0, 18.75, 1.50),
                p("claude-sonnet-4", 3.0, 15.0, 3.75, 0.30),
                p("claude-haiku-4-5", 1.0, 5.0, 1.25, 0.10),
                p("claude-3-5-haiku", 0.80, 4.0, 1.0, 0.08),
            ],
        }
    }
}

impl PriceTable {
    /// The built-in table with the configuration's prices (`[sessions.prices]`) over it:
    /// a prefix given there replaces the built-in one, a new prefix is added. The name
    /// says so.
    pub fn with_overrides(overrides: Vec<Price>) -> Self {
        let mut table = Self::default();
        if overrides.is_empty() {
            return table;
        }
        let names: Vec<String> = overrides.iter().map(|p| p.prefix.clone()).collect();
        for price in overrides {
            table.prices.retain(|p| p.prefix != price.prefix);
            table.prices.push(price);
        }
        table.name = format!(
            "{}, with the configuration's prices for {}",
            table.name,
            names.join(", ")
        );
        table
    }

    /// The prices of a model id, if its family is in the table.
    pub fn of(&self, model: &str) -> Option<&Price> {
        self.prices
            .iter()
            .filter(|p| model.starts_with(p.prefix.as_str()))
            .max_by_key(|p| p.prefix.len())
    }

    /// What these tokens cost at list prices, if the model has a price.
    pub fn cost(&self, model: &str, t: &Tokens) -> Option<f64> {
        let p = self.of(model)?;
        let write_5m = t.cache_write.saturating_sub(t.cache_write_1h);
        Some(
            (t.input as f64 * p.input
                + t.output as f64 * p.output
                + write_5m as f64 * p.cache_write
                + t.cache_write_1h as f64 * p.input * 2.0
                + t.cache_read as f64 * p.cache_read)
                / 1e6,
        )
    }
}

/// The configuration that gives `model` a price, for a message that says how to fix an
/// unknown cost (docs/sessions.md, "Prices").
pub fn price_line(model: &str) -> String {
    format!(
        "[sessions.prices] \"{}\" = {{ input = …, output = …, cache_write = …, cache_read = … }}",
        crate::core::text::printable(model).replace('"', "'")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_replaces_or_adds_prices_and_says_so() {
        let table = PriceTable::with_overrides(vec![Price {
            prefix: "claude-sonnet-4".into(),
            input: 1.0,
            output: 2.0,
            cache_write: 3.0,
            cache_read: 4.0,
        }]);
        assert_eq!(table.of("claude-sonnet-4-5").map(|p| p.output), Some(2.0));
        assert_eq!(table.of("claude-opus-4-5").map(|p| p.input), Some(5.0));
        assert!(
            table
                .name
                .contains("configuration's prices for claude-sonnet-4")
        );
    }

    #[test]
    fn the_longest_prefix_wins_and_an_hour_of_cache_costs_twice_the_input() {
        let table = PriceTable::default();
        assert_eq!(
            table.of("claude-opus-4-5-20251101").map(|p| p.input),
            Some(5.0)
        );
        assert_eq!(
            table.of("claude-opus-4-1-20250805").map(|p| p.input),
            Some(15.0)
        );
        assert!(table.of("gpt-4o").is_none());
        let t = Tokens {
            cache_write: 1_000_000,
            cache_write_1h: 1_000_000,
            ..Tokens::default()
        };
        assert_eq!(table.cost("claude-sonnet-4-5", &t), Some(6.0));
    }
}
