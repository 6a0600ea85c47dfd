//! The preparing of one line of a rollout into its [`Act`] (see [`super::act`]): its JSON
//! read, its payload told apart by the line's type, and handed to the readers of items
//! and events.

use std::borrow::Cow;

use super::act::{Act, LineContext, Prepared, Stamp};
use super::events::{event_act, prepare_event, tokens_of};
use super::items::prepare_item;
use super::wire::{Body, Payload, WireLine};
use super::CodexMeta;
use crate::formats::claude_code::parse::{check_line_length, LineError};
use crate::formats::claude_code::records::Position;
use crate::json::quick;

/// A line of the file: its text when the file is UTF-8 throughout (read without checking
/// its strings again), else its bytes.
#[derive(Clone, Copy)]
pub(super) enum LineText<'a> {
    /// The line, valid UTF-8.
    Text(&'a str),
    /// The line's bytes.
    Bytes(&'a [u8]),
}

impl<'a> LineText<'a> {
    /// The line's bytes.
    fn bytes(self) -> &'a [u8] {
        match self {
            LineText::Text(t) => t.as_bytes(),
            LineText::Bytes(b) => b,
        }
    }

    /// The line read as a `T`: as serde_json reads it, by [`quick::from_str`] when it is
    /// text (a rollout's outputs and arguments escape every few bytes, which that reader
    /// checks many bytes at a time).
    fn read<T: serde::Deserialize<'a>>(self) -> serde_json::Result<T> {
        match self {
            LineText::Text(t) => quick::from_str(t),
            LineText::Bytes(b) => serde_json::from_slice(b),
        }
    }
}

/// Reads `line`, read at `pos`.
pub(super) fn prepare_line(
    cx: &LineContext<'_>,
    line: LineText<'_>,
    pos: Position,
) -> Result<Prepared, LineError> {
    let bytes = line.bytes();
    check_line_length(bytes.len())?;
    let mut wire: WireLine<'_> = line.read().map_err(|e| LineError::of_object_line(bytes, &e))?;
    let stamp = Stamp::of(wire.timestamp.take());
    let (count, act) = match (std::mem::take(&mut wire.payload), wire.kind.take()) {
        (Body::Absent, kind) => bare_line(cx, line, kind, wire, pos),
        (_, None) => ("(missing)".to_owned(), Act::Nothing),
        (payload, Some(kind)) => rollout_item(cx, kind, payload, pos),
    };
    Ok(Prepared { count, stamp, act })
}

/// A line without a payload (`wire`, its `type` being `kind`): the older layout's marker,
/// header or bare item.
fn bare_line<'a>(
    cx: &LineContext<'_>,
    line: LineText<'a>,
    kind: Option<Cow<'a, str>>,
    wire: WireLine<'a>,
    pos: Position,
) -> (String, Act) {
    match (kind, wire.record_type) {
        (None, Some(record_type)) => (format!("record_type:{record_type}"), Act::Nothing),
        (None, None) if wire.id.is_some() && wire.role.is_none() => {
            let meta = CodexMeta {
                id: wire.id,
                ..CodexMeta::default()
            };
            ("header".to_owned(), Act::Header(meta))
        }
        (kind, _) if kind.is_some() || wire.role.is_some() => {
            // The line was read as an envelope already, so it reads as an item too.
            let mut bare: Box<Payload<'_>> = line.read().unwrap_or_default();
            bare.kind = kind;
            bare.id = wire.id.map(Cow::Owned);
            prepare_item(cx, bare, pos)
        }
        _ => ("(missing)".to_owned(), Act::Nothing),
    }
}

/// A modern line of type `kind`.
fn rollout_item(cx: &LineContext<'_>, kind: Cow<'_, str>, payload: Body<'_>, pos: Position) -> (String, Act) {
    let act = match (&*kind, payload) {
        ("turn_context", Body::TurnContext(context)) => Act::TurnContext(context.model),
        ("session_meta", Body::Item(p)) => Act::Meta(CodexMeta::of_payload(&p)),
        ("response_item", Body::Item(p)) => return prepare_item(cx, p, pos),
        ("event_msg", Body::Item(p)) => return prepare_event(cx, p),
        ("event_msg", Body::Event(name)) => return (format!("event_msg:{name}"), event_act(&name)),
        ("event_msg", Body::TokenCount(usage)) => {
            let act = usage.map_or(Act::Nothing, |u| Act::Tokens(tokens_of(&u)));
            return ("event_msg:token_count".to_owned(), act);
        }
        ("compacted", Body::Item(p)) => super::events::compaction(&cx.texts, &p, None),
        _ => Act::Nothing,
    };
    (kind.into_owned(), act)
}
