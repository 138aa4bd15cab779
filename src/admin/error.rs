//! Why an admin command did not do what it asked. Each text is the answer posted in the chat,
//! so each says what to do instead.

use crate::chains::ChainFailure;
use crate::escalation::DecideError;
use crate::store::{EscalationState, StoreError};

/// An admin command that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    /// The store failed; nothing was changed.
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
    /// `/baton budget set` was refused (an unknown budget, a value that is not a limit).
    #[error("{0}")]
    Budget(String),
    /// No bot by that id, name or platform user id.
    #[error("No bot named `{0}`; `/baton bots` lists them.")]
    UnknownBot(String),
    /// The bot has no account on this platform, so it has no session here.
    #[error("`{bot}` has no account on {platform}.")]
    NoAccountHere {
        /// The bot.
        bot: crate::bot_id::BotId,
        /// This chat's platform.
        platform: String,
    },
    /// A pairing code past its hour.
    #[error(
        "Code {code} (from {user} on {platform}) has expired: codes last one hour. Ask them to \
         message the bot again for a new code."
    )]
    PairingExpired {
        /// The code as given.
        code: String,
        /// Whose it was.
        user: String,
        /// Where.
        platform: String,
    },
    /// No pending pairing has that code.
    #[error(
        "No pending pairing with code {0}; check the code (8 characters), or list them with \
         `baton pairing list`."
    )]
    PairingUnknown(String),
    /// The approval request was decided already.
    #[error("No pending approval {id}: it was already {state}.")]
    ApprovalSettled {
        /// The request.
        id: String,
        /// How it was decided.
        state: EscalationState,
    },
    /// The id is a question's, answered in its chat.
    #[error(
        "No pending approval {0}: that is a question, and the answer is a message in its chat."
    )]
    NotAnApproval(String),
    /// No approval request has that id.
    #[error("No pending approval {0}.")]
    NoApproval(String),
    /// `chain start` was refused.
    #[error("The chain was not started: {0}.")]
    ChainNotStarted(ChainFailure),
    /// No chain has that id.
    #[error("No chain `{0}`; `/baton chain status` lists the open ones here.")]
    NoChain(String),
    /// `chain stop` without an id, and no chain is open here.
    #[error("No open chain in this chat to stop.")]
    NothingToStop,
    /// The chain ended before.
    #[error("Chain {id} was already {state}.")]
    ChainClosed {
        /// The chain.
        id: String,
        /// How it ended.
        state: String,
    },
    /// A chain operation failed.
    #[error("{0}.")]
    Chain(ChainFailure),
}

impl AdminError {
    /// An approval decision that could not be made, as an admin is told it.
    pub(crate) fn of_decision(id: &str, err: DecideError) -> AdminError {
        match err {
            DecideError::NotPending(id, state) => AdminError::ApprovalSettled { id, state },
            DecideError::NotAnApproval(id) => AdminError::NotAnApproval(id),
            DecideError::Store(err) => AdminError::Store(err),
            DecideError::Unknown(_) | DecideError::SelfApproval(_) => {
                AdminError::NoApproval(id.trim().to_owned())
            }
        }
    }
}
