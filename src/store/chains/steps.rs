//! A chain's lineage: per turn, the artifacts its prompt named (in) and the artifacts the bot
//! made while it held the turn (out). Nothing extra is written for it: a chain turn runs as
//! [`turn_run_id`], so an artifact put in that turn already carries the chain and the turn, and
//! a handoff's prompt is in the chain's log. Reading both back is enough, and a chain replayed
//! after a crash cannot record a step twice.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ChainEntryKind;
use super::rows::{by_id as chain_by_id, normalize};
use crate::store::artifacts::{Artifact, by_id, ids_named_in, made_by_runs_under};
use crate::store::sql::{Db, DbError, args};
use crate::store::{Store, StoreError};

/// The run id of turn `turn` of chain `chain`: what its artifacts record as their `run_id`.
pub fn turn_run_id(chain: &str, turn: i64) -> String {
    format!("{}{turn}", turn_runs(chain))
}

/// What the run ids of chain `chain`'s turns start with.
pub fn turn_runs(chain: &str) -> String {
    format!("chain:{chain}:t")
}

/// One turn of a chain that took artifacts in or made some.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainStep {
    /// The chain's turn number.
    pub turn: i64,
    /// The turn's run id (`chain:<id>:t<turn>`).
    pub run_id: String,
    /// Who took the turn: the bot handed it, else the bot that made its artifacts.
    pub bot: String,
    /// The artifacts the handoff's prompt named by id (those that exist).
    pub artifacts_in: Vec<Artifact>,
    /// The artifacts made in the turn, oldest first, each with its maker and `inputs`.
    pub artifacts_out: Vec<Artifact>,
}

fn steps(db: Db<'_>, id: &str) -> Result<Vec<ChainStep>, DbError> {
    let Some(chain) = chain_by_id(db, id)? else {
        return Ok(Vec::new());
    };
    let mut steps: BTreeMap<i64, ChainStep> = BTreeMap::new();
    let mut handed: BTreeMap<i64, String> = BTreeMap::new();
    let step = |turn: i64, bot: &str| ChainStep {
        turn,
        run_id: turn_run_id(&chain.id, turn),
        bot: bot.to_owned(),
        artifacts_in: Vec::new(),
        artifacts_out: Vec::new(),
    };
    let handoffs = db.query_map(
        "SELECT turn, recipient, content FROM chain_messages
         WHERE chain = ?1 AND kind = ?2 ORDER BY id",
        args![&chain.id, ChainEntryKind::Handoff.as_str()],
        |row| {
            Ok((
                row.get::<i64>(0)?,
                row.get::<String>(1)?,
                row.get::<String>(2)?,
            ))
        },
    )?;
    for (turn, bot, prompt) in handoffs {
        let mut taken = Vec::new();
        for named in ids_named_in(&prompt) {
            taken.extend(by_id(db, &named)?);
        }
        if !taken.is_empty() {
            steps
                .entry(turn)
                .or_insert_with(|| step(turn, &bot))
                .artifacts_in = taken;
        }
        handed.insert(turn, bot);
    }
    let prefix = turn_runs(&chain.id);
    for artifact in made_by_runs_under(db, &prefix)? {
        let turn = artifact
            .run_id
            .as_deref()
            .and_then(|run| run.strip_prefix(prefix.as_str()))
            .and_then(|n| n.parse::<i64>().ok());
        let Some(turn) = turn else { continue };
        let bot = handed
            .get(&turn)
            .cloned()
            .unwrap_or_else(|| artifact.bot.to_string());
        steps
            .entry(turn)
            .or_insert_with(|| step(turn, &bot))
            .artifacts_out
            .push(artifact);
    }
    Ok(steps.into_values().collect())
}

impl Store {
    /// Chain `id`'s steps that took artifacts in or made some, by turn (empty for an unknown
    /// chain).
    pub async fn chain_steps(&self, id: &str) -> Result<Vec<ChainStep>, StoreError> {
        let id = normalize(id);
        self.read(move |db| steps(db, &id)).await
    }
}
