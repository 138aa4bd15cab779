//! How a turn ended ([`TurnEnd`]), and why one produced nothing ([`TurnFailure`]): what the
//! turn (`turn.rs`) returns, and what its budget check (`budget_step.rs`) ends it with before
//! a model is called.

use std::time::Duration;

use crate::backend::Usage;

/// How a turn ended, before anything is posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnEnd {
    /// The bot said this (silent token already stripped).
    Reply {
        /// The text.
        text: String,
        /// The model that said it.
        model: String,
        /// Tokens the turn used, where the backend reports them.
        usage: Option<Usage>,
    },
    /// The bot chose silence (recorded).
    Silent {
        /// The model that chose it.
        model: String,
        /// Tokens the turn used, where the backend reports them.
        usage: Option<Usage>,
    },
    /// The backend failed or ran out of time (recorded).
    Failed(TurnFailure),
}

/// Why a turn produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TurnFailure {
    /// The backend answered with an error.
    #[error("{0}")]
    Backend(String),
    /// A `stop` budget is used up (its name): no model call was made.
    #[error("budget `{0}` is used up: the model call was not made")]
    Budget(String),
    /// The backend refused the turn for a reason the config must fix (an unknown model, a bad
    /// key): reported to the chat as such, not as "try again".
    #[error("{0}")]
    Misconfigured(String),
    /// The backend was still working at the time limit and was stopped.
    #[error("the turn took longer than {} s and was stopped", .0.as_secs())]
    TimedOut(Duration),
    /// Stopped before it ended (`/baton stop`, a shutdown): nothing of it is posted.
    #[error("{0}")]
    Stopped(super::Stop),
    /// The delivery it ran for was settled while the turn waited for its session (canceled, or
    /// failed on record by a recovery): the model was not called.
    #[error(
        "its delivery ended before the turn began (canceled, or failed on record): the model was not called"
    )]
    DeliverySettled,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure says what became of the turn in words the chat can be told.
    #[test]
    fn a_failure_says_what_became_of_the_turn() {
        let timed_out = TurnFailure::TimedOut(Duration::from_secs(90));
        assert_eq!(
            timed_out.to_string(),
            "the turn took longer than 90 s and was stopped"
        );
        let budget = TurnFailure::Budget("daily".into());
        assert_eq!(
            budget.to_string(),
            "budget `daily` is used up: the model call was not made"
        );
    }
}
