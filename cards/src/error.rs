//! [`CardError`]: why a card could not be built or rendered, phrased for the model that sent it.
//!
//! Every message names the field (a path such as `card.rows[2].values`) and says what to send
//! instead, because the text goes back to the model as the tool result and the model retries.

use thiserror::Error;

/// Why a card could not be parsed or rendered.
///
/// `Display` is the text the model reads; it always says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CardError {
    /// A field is missing, has the wrong type or an impossible value. `path` is where, in the
    /// tool's arguments (`card.items[3].name`, `messages[1].updateComponents.components[0]`).
    #[error("{path}: {problem}")]
    Invalid {
        /// Where the problem is, in the tool's arguments.
        path: String,
        /// What is wrong and what to send instead.
        problem: String,
    },
    /// A2UI components that cannot be reached from `root` through `child` / `children`.
    #[error(
        "{path}: components not reachable from `root`: {}; list each one in a parent's \
         `children` (or `child`), or remove it",
        ids.join(", ")
    )]
    Orphans {
        /// The `updateComponents` message, e.g. `messages[1].updateComponents`.
        path: String,
        /// The unreachable component ids, in the order they were sent.
        ids: Vec<String>,
    },
    /// The rendered card is over the platform's size limit (Lark: 30 KB of card JSON).
    #[error(
        "the card is {bytes} bytes as {platform} card JSON, over the {limit}-byte limit; \
         shorten the texts, send fewer rows or items, or split it into several cards"
    )]
    TooLarge {
        /// Which platform refused it (`Lark`).
        platform: &'static str,
        /// Size of the rendered card.
        bytes: usize,
        /// The platform's limit.
        limit: usize,
    },
    /// Custom A2UI layouts cannot be shown on this platform.
    #[error(
        "{platform} cannot show custom A2UI `messages`; send `card` instead, with `type` one \
         of compare, rank, stats, timeline and that template's fields"
    )]
    A2uiUnsupported {
        /// The platform (`Lark`).
        platform: &'static str,
    },
}

impl CardError {
    /// Shorthand for [`CardError::Invalid`].
    pub fn invalid(path: impl Into<String>, problem: impl Into<String>) -> Self {
        CardError::Invalid {
            path: path.into(),
            problem: problem.into(),
        }
    }
}
