//! What a model call cost (`[prices."<model>"]`, USD per million tokens), and the estimate for a
//! backend that reports no usage: characters / 4, marked estimated.

use crate::backend::{TurnRequest, Usage};
use crate::config::PricesConfig;

/// The call's cost in USD, `None` when its model has no price.
pub(crate) fn cost(prices: &PricesConfig, model: &str, usage: Usage) -> Option<f64> {
    let price = prices.get(model)?;
    Some(
        (usage.prompt_tokens as f64 * price.prompt
            + usage.completion_tokens as f64 * price.completion)
            / 1_000_000.0,
    )
}

/// Tokens guessed from characters (4 a token, rounded up) for a backend that reports none: the
/// request's lines read, the reply written.
pub fn estimate(request: &TurnRequest, reply: &str) -> Usage {
    let read: usize = request
        .messages
        .iter()
        .map(|l| l.content.chars().count())
        .sum();
    let tokens = |chars: usize| u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX);
    Usage {
        prompt_tokens: tokens(read),
        completion_tokens: tokens(reply.chars().count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PriceConfig;

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let mut prices = PricesConfig::new();
        prices.insert(
            "m".into(),
            PriceConfig {
                prompt: 0.15,
                completion: 0.6,
            },
        );
        let usage = Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 500_000,
        };
        let cost = cost(&prices, "m", usage).unwrap();
        assert!((cost - 0.45).abs() < 1e-12, "{cost}");
        assert_eq!(super::cost(&prices, "other", usage), None);
    }
}
