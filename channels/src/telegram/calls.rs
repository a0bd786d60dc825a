//! Bot API calls whose answer Ethan reads only in part: teloxide's request (payload, HTTP,
//! errors) with a narrow answer type ([`Narrow`]), so teloxide's `Message`, `Update` and `Me`
//! deserialisers — most of the Bot API — never enter the binary. `sendMessage` answers
//! [`Sent`], `getMe` [`Me`], `getFile` [`FileInfo`], `getWebhookInfo` [`WebhookInfo`],
//! `getUpdates` the updates as JSON values (read one by one, [`super::wire::Update::read`]),
//! and `editMessageText`, whose answer is not read, [`IgnoredAny`].

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize, Serializer};
use std::marker::PhantomData;
use std::time::Duration;
use teloxide::requests::{JsonRequest, Payload};
use teloxide::Bot;

/// A teloxide payload `P` sent as it is, its answer read as `O`.
pub(crate) struct Narrow<P, O> {
    payload: P,
    answer: PhantomData<fn() -> O>,
}

impl<P: Payload, O> Payload for Narrow<P, O> {
    type Output = O;
    const NAME: &'static str = P::NAME;

    fn timeout_hint(&self) -> Option<Duration> {
        self.payload.timeout_hint()
    }
}

impl<P: Serialize, O> Serialize for Narrow<P, O> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.payload.serialize(s)
    }
}

/// The request `payload` on `bot`, its answer read as `O`.
pub(crate) fn call<P, O>(bot: &Bot, payload: P) -> JsonRequest<Narrow<P, O>>
where
    P: Payload + Serialize + 'static,
    O: DeserializeOwned + 'static,
{
    JsonRequest::new(
        bot.clone(),
        Narrow {
            payload,
            answer: PhantomData,
        },
    )
}

/// What Ethan reads of a sent `Message`: its id.
#[derive(Debug, Deserialize)]
pub(crate) struct Sent {
    pub message_id: i32,
}

/// What Ethan reads of `getMe`'s `User`.
#[derive(Debug, Deserialize)]
pub(crate) struct Me {
    pub id: u64,
    pub username: Option<String>,
}

/// What Ethan reads of `getFile`'s `File`: where to download it, and its size.
#[derive(Debug, Deserialize)]
pub(crate) struct FileInfo {
    #[serde(default)]
    pub file_path: String,
    pub file_size: Option<u64>,
}

/// What Ethan reads of `getWebhookInfo`: the webhook's URL (empty when none is set).
#[derive(Debug, Deserialize)]
pub(crate) struct WebhookInfo {
    #[serde(default)]
    pub url: String,
}

/// `editMessageText`'s answer (the message, or `true`), not read.
pub(crate) type Unread = IgnoredAny;
