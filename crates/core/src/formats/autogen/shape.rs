//! The first pass over an AutoGen log: its shape. The log is read as strictly as
//! `serde_json::Value` reads JSON (the same nesting limit, numbers, strings, and objects
//! standing for raw values) but nothing of it is kept: what is learnt is where its messages
//! are (a JSON array, JSON lines, or the list a whole-document object wraps, by the rules of
//! [`super::agentchat::unwrap`]), the form of that list, where reading it fails (a `null`
//! entry), and the most one entry holds for a moment while [`super::read`], the
//! second pass, reads it. Only the keys of the objects that may wrap messages are kept, and
//! charged to the reading's budget: an object whose keys repeat is read as a map keeps it
//! (the first place of each key, its last value).

use std::borrow::Cow;
use std::fmt;
use std::hash::BuildHasher;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::agentchat::{Form, MemberValue, ObjectTraits, CLAUDE_KEYS, COMMUGRAPH_KEYS};
use super::AutogenError;
use crate::memory_bound::RecordBudget;

/// serde_json's `Value` (its `raw_value` feature) reads an object whose first key is this
/// as the JSON its value, a string, holds.
pub(crate) const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// The keys of an entry reading its message looks at (CommuGraph's fields, AgentChat's and
/// 0.2's); the second pass keeps only these of an entry.
pub(crate) const MESSAGE_KEYS: [&str; 20] = [
    "sender",
    "name",
    "from",
    "recipient",
    "to",
    "message",
    "content",
    "text",
    "role",
    "timestamp",
    "time",
    "created_at",
    "date",
    "type",
    "function_call",
    "source",
    "target",
    "tool_calls",
    "tool_responses",
    "tool_call_id",
];

/// The keys whose list a whole-document object wraps, in the order they are looked for.
pub(crate) const LIST_KEYS: [&str; 4] = ["messages", "message_thread", "chat_history", "llm_messages"];

/// The keys of an object wrapping another that wraps the list.
const WRAPPER_KEYS: [&str; 2] = ["task_result", "llm_context"];

/// A team state's agents, each holding its `message_thread`.
const AGENT_STATES: &str = "agent_states";

/// A team state's agent's list.
const MESSAGE_THREAD: &str = "message_thread";

/// Bytes a JSON value held as a `serde_json::Value` takes besides its strings: the value,
/// its slot in its list or map (a map's key and index too), their growth, and the string a
/// message's text makes of it for a moment.
const VALUE_COST: usize = 160;

/// Bytes a distinct key of an object that may wrap messages costs while the log is read,
/// besides twice its length: its place in the table of keys, what is known of its value,
/// and, for a peer of a `chat_messages` dict, its place in the plan and in the reading
/// (measured: 272 bytes a peer with a key of 8 bytes, in a dict of 200,000).
const KEY_COST: usize = 320;

/// What holding a JSON value as a `serde_json::Value` takes for a moment: its values and
/// its strings' bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Footprint {
    values: usize,
    bytes: usize,
}

impl Footprint {
    /// One value holding `bytes` of string.
    fn one(bytes: usize) -> Footprint {
        Footprint { values: 1, bytes }
    }

    /// The two together.
    fn plus(self, other: Footprint) -> Footprint {
        Footprint {
            values: self.values.saturating_add(other.values),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    /// Its bytes: each value's [`VALUE_COST`], and the strings twice (as read, and as a
    /// message's text makes them into one).
    pub(crate) fn bytes(self) -> usize {
        self.values
            .saturating_mul(VALUE_COST)
            .saturating_add(self.bytes.saturating_mul(2))
    }
}

/// What an entry of a list of messages is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// `null`: CommuGraph fails on it.
    Null,
    /// An object: what tells its form, and what its members a message is read from hold.
    Object(ObjectTraits, Footprint),
    /// Anything else, which is no message in any form.
    Other,
}

/// What a list of entries is made of, as far as reading it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListShape {
    /// Its entries.
    pub(crate) len: usize,
    /// The position of its first `null`.
    pub(crate) first_null: Option<usize>,
    /// True when an object entry names a party (`sender`, `recipient`, `from`, `to`).
    names_parties: bool,
    /// What tells the form of its first object entry.
    first_object: Option<ObjectTraits>,
    /// True when every entry is `null` or a 0.2 / AG2 chat message.
    chat_or_null: bool,
    /// True when an entry is not `null`.
    not_only_null: bool,
    /// The most one of its object entries holds for a moment while it is read.
    pub(crate) largest_entry: usize,
}

impl Default for ListShape {
    fn default() -> Self {
        ListShape {
            len: 0,
            first_null: None,
            names_parties: false,
            first_object: None,
            chat_or_null: true,
            not_only_null: false,
            largest_entry: 0,
        }
    }
}

impl ListShape {
    /// Notes the next entry.
    fn note(&mut self, entry: Entry) {
        match entry {
            Entry::Null => {
                self.first_null.get_or_insert(self.len);
            }
            Entry::Object(traits, footprint) => {
                self.names_parties |= traits.names_parties();
                self.first_object.get_or_insert(traits);
                self.chat_or_null &= traits.is_chat_message();
                self.not_only_null = true;
                self.largest_entry = self.largest_entry.max(footprint.bytes());
            }
            Entry::Other => {
                self.chat_or_null = false;
                self.not_only_null = true;
            }
        }
        self.len += 1;
    }

    /// The form its messages are read in: CommuGraph's when an object entry names a party,
    /// else the form of its first object entry.
    pub(crate) fn form(&self) -> Form {
        match self.first_object {
            _ if self.names_parties => Form::CommuGraph,
            Some(first) if first.is_agentchat_message() => Form::AgentChat,
            Some(first) if first.is_chat_message() => Form::ChatList,
            _ => Form::CommuGraph,
        }
    }
}

/// The shape of JSON lines: errors in CommuGraph's words at the first line that is not
/// JSON or is `null`. Blank lines are skipped; an entry's step is its line's 0-based number.
pub(crate) fn lines(text: &str) -> Result<ListShape, AutogenError> {
    let mut shape = ListShape::default();
    for (i, line) in nonblank_lines(text) {
        let entry = read_whole(line, EntrySeed).map_err(|_| AutogenError::Line(i + 1))?;
        if entry == Entry::Null {
            return Err(AutogenError::Entry(i + 1));
        }
        shape.note(entry);
    }
    Ok(shape)
}

/// The lines of JSON lines that are not blank, trimmed, with their 0-based numbers.
pub(crate) fn nonblank_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .map(str::trim)
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
}

/// The shape of a JSON array: [`AutogenError::Array`] when it does not parse, else
/// [`AutogenError::Entry`] at its first `null`.
pub(crate) fn array(text: &str) -> Result<ListShape, AutogenError> {
    let shape = read_whole(text, ListSeed).map_err(|_| AutogenError::Array)?;
    match shape.first_null {
        Some(i) => Err(AutogenError::Entry(i + 1)),
        None => Ok(shape),
    }
}

/// Reads the whole of `json` with `seed`, as `serde_json::from_str` does: nothing but
/// whitespace may follow the value.
pub(crate) fn read_whole<T>(
    json: &str,
    seed: impl for<'j> DeserializeSeed<'j, Value = T>,
) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(json);
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// The rest of an object whose first key is [`RAW_VALUE_TOKEN`], read as `serde_json::Value`
/// reads it: its value, a string, is the JSON the object stands for, which `seed` reads
/// (the deserializer refuses the object if another member follows). Also the string's
/// length, which is held while it is read.
pub(crate) fn through_raw_value<'de, A, T>(
    map: &mut A,
    seed: impl for<'j> DeserializeSeed<'j, Value = T>,
) -> Result<(T, usize), A::Error>
where
    A: MapAccess<'de>,
{
    let json: String = map.next_value()?;
    let value = read_whole(&json, seed).map_err(de::Error::custom)?;
    Ok((value, json.len()))
}

/// An object's key: borrowed from the input unless it holds escapes.
pub(crate) struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }
}

/// Reads any value strictly and keeps nothing of it: what the rules telling the forms
/// apart need of it, and what holding it would take.
#[derive(Clone, Copy)]
struct Measure;

impl<'de> DeserializeSeed<'de> for Measure {
    type Value = (MemberValue, Footprint);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Measure {
    type Value = (MemberValue, Footprint);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok((MemberValue::Other, Footprint::one(0)))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok((MemberValue::Other, Footprint::one(0)))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok((MemberValue::Other, Footprint::one(0)))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok((MemberValue::Other, Footprint::one(0)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok((MemberValue::of_str(s), Footprint::one(s.len())))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((MemberValue::Other, Footprint::one(0)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut footprint = Footprint::one(0);
        while let Some((_, item)) = seq.next_element_seed(Measure)? {
            footprint = footprint.plus(item);
        }
        Ok((MemberValue::Other, footprint))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(first) = map.next_key_seed(KeySeed)? else {
            return Ok((MemberValue::Other, Footprint::one(0)));
        };
        if first == RAW_VALUE_TOKEN {
            let ((value, footprint), json) = through_raw_value(&mut map, Measure)?;
            return Ok((
                value,
                footprint.plus(Footprint {
                    values: 0,
                    bytes: json,
                }),
            ));
        }
        let mut footprint = Footprint::one(0);
        let mut key = Some(first);
        while let Some(k) = key {
            let (_, value) = map.next_value_seed(Measure)?;
            footprint = footprint.plus(Footprint::one(k.len())).plus(value);
            key = map.next_key_seed(KeySeed)?;
        }
        Ok((MemberValue::Other, footprint))
    }
}

/// Reads an entry of a list of messages.
#[derive(Clone, Copy)]
struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Entry;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an entry")
    }

    scalars_read_as!(Entry::Other);

    fn visit_unit<E>(self) -> Result<Entry, E> {
        Ok(Entry::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Entry, A::Error> {
        Measure.visit_seq(seq).map(|_| Entry::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut traits = ObjectTraits::default();
        let mut footprint = Footprint::one(0);
        let mut key = map.next_key_seed(KeySeed)?;
        if key.as_deref() == Some(RAW_VALUE_TOKEN) {
            return through_raw_value(&mut map, EntrySeed).map(|(entry, _)| entry);
        }
        while let Some(k) = key {
            let (value, held) = map.next_value_seed(Measure)?;
            traits.note(&k, value);
            if MESSAGE_KEYS.contains(&k.as_ref()) {
                footprint = footprint.plus(Footprint::one(k.len())).plus(held);
            }
            key = map.next_key_seed(KeySeed)?;
        }
        Ok(Entry::Object(traits, footprint))
    }
}

/// Reads a list of entries; any other value is refused.
#[derive(Clone, Copy)]
struct ListSeed;

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = ListShape;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ListSeed {
    type Value = ListShape;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ListShape, A::Error> {
        let mut shape = ListShape::default();
        while let Some(entry) = seq.next_element_seed(EntrySeed)? {
            shape.note(entry);
        }
        Ok(shape)
    }
}

/// The distinct keys of an object in order of first appearance, each with how many times it
/// came and the last of its values: what a map keeps of an object whose keys repeat.
pub(crate) struct DistinctKeys<T> {
    members: Vec<Distinct<T>>,
    table: hashbrown::HashTable<usize>,
    hasher: foldhash::fast::RandomState,
}

/// A distinct key of an object.
pub(crate) struct Distinct<T> {
    /// The key.
    pub(crate) key: String,
    /// How many members have it.
    pub(crate) occurrences: usize,
    /// The value of the last of them.
    pub(crate) last: T,
}

impl<T> Distinct<T> {
    /// The 0-based place of the last member of the key among the members of the key.
    pub(crate) fn last_occurrence(&self) -> usize {
        self.occurrences - 1
    }
}

impl<T> Default for DistinctKeys<T> {
    fn default() -> Self {
        DistinctKeys {
            members: Vec::new(),
            table: hashbrown::HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl<T> DistinctKeys<T> {
    /// Notes a member; true when its key is new.
    fn note(&mut self, key: Cow<'_, str>, value: T) -> bool {
        let hash = self.hasher.hash_one(key.as_ref());
        let members = &self.members;
        let found = self
            .table
            .find(hash, |&i| members[i].key == key.as_ref())
            .copied();
        if let Some(i) = found {
            let member = &mut self.members[i];
            member.occurrences += 1;
            member.last = value;
            return false;
        }
        let (members, hasher) = (&self.members, &self.hasher);
        self.table
            .insert_unique(hash, members.len(), |&i| hasher.hash_one(members[i].key.as_str()));
        self.members.push(Distinct {
            key: key.into_owned(),
            occurrences: 1,
            last: value,
        });
        true
    }

    /// The key `key`, if a member has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Distinct<T>> {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&i| self.members[i].key == key)
            .map(|&i| &self.members[i])
    }

    /// The keys in order of first appearance.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Distinct<T>> {
        self.members.iter()
    }
}

/// What an object that may wrap messages holds: its distinct keys, each with the shape of
/// its last value.
#[derive(Default)]
pub(crate) struct ObjectShape {
    members: DistinctKeys<Member>,
}

/// The shape of a member's value, as far as finding the messages goes.
pub(crate) enum Member {
    /// A list.
    List(ListShape),
    /// An object under a key whose object may wrap the messages (`task_result`,
    /// `llm_context`).
    Wrapper(Box<ObjectShape>),
    /// A team state's `agent_states`: each agent's `message_thread`, if it has one.
    States(DistinctKeys<Option<Thread>>),
    /// Anything else.
    Other,
}

/// An agent state's `message_thread`: the place of the last member of that key among them,
/// and the list it holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thread {
    occurrence: usize,
    shape: ListShape,
}

/// What a member's object value is read as, by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Passed over.
    Plain,
    /// An object that may wrap the messages.
    Wrapper,
    /// A team state's agents.
    States,
}

impl Role {
    fn of(key: &str) -> Role {
        if WRAPPER_KEYS.contains(&key) {
            Role::Wrapper
        } else if key == AGENT_STATES {
            Role::States
        } else {
            Role::Plain
        }
    }
}

/// Why a whole-document object was not surveyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PastBound;

/// The plan for reading a whole-document object's messages, `None` when it wraps none (or
/// does not parse): then the log is read as JSON lines. [`PastBound`] when its keys alone
/// cost more than `budget` has room for.
pub(crate) fn document(trimmed: &str, budget: &RecordBudget) -> Result<Option<Plan>, PastBound> {
    match read_whole(trimmed, DocumentSeed { budget }) {
        Ok(shape) => Ok(shape.plan()),
        Err(_) if budget.is_exhausted() => Err(PastBound),
        Err(_) => Ok(None),
    }
}

/// Reads the whole document: an object (read as a map, whose first key is no raw value).
#[derive(Clone, Copy)]
struct DocumentSeed<'b> {
    budget: &'b RecordBudget,
}

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = ObjectShape;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = ObjectShape;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ObjectShape, A::Error> {
        let first = map.next_key_seed(KeySeed)?;
        read_object(first, map, self.budget)
    }
}

/// The members of an object from its `first` key on, noting each key (charged when new).
fn read_object<'de, A: MapAccess<'de>>(
    first: Option<Cow<'de, str>>,
    mut map: A,
    budget: &RecordBudget,
) -> Result<ObjectShape, A::Error> {
    let mut shape = ObjectShape::default();
    let mut key = first;
    while let Some(k) = key {
        let role = Role::of(&k);
        let value = map.next_value_seed(ValueSeed { budget, role })?;
        note_key(&mut shape.members, k, value, budget)?;
        key = map.next_key_seed(KeySeed)?;
    }
    Ok(shape)
}

/// Notes a member in `keys`, charging a new key to `budget`; an error once it has run out.
fn note_key<T, E: de::Error>(
    keys: &mut DistinctKeys<T>,
    key: Cow<'_, str>,
    value: T,
    budget: &RecordBudget,
) -> Result<(), E> {
    let len = key.len();
    if keys.note(key, value) && !budget.charge(KEY_COST.saturating_add(2 * len)) {
        return Err(E::custom("past the memory bound"));
    }
    Ok(())
}

/// Reads a member's value: a list's shape, the object its key says it is, or nothing.
#[derive(Clone, Copy)]
struct ValueSeed<'b> {
    budget: &'b RecordBudget,
    role: Role,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Member;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalars_read_as!(Member::Other);

    fn visit_unit<E>(self) -> Result<Member, E> {
        Ok(Member::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Member, A::Error> {
        ListSeed.visit_seq(seq).map(Member::List)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Member, A::Error> {
        let first = map.next_key_seed(KeySeed)?;
        if first.as_deref() == Some(RAW_VALUE_TOKEN) {
            return through_raw_value(&mut map, self).map(|(member, _)| member);
        }
        match self.role {
            Role::Wrapper => read_object(first, map, self.budget).map(|o| Member::Wrapper(Box::new(o))),
            Role::States => read_states(first, map, self.budget).map(Member::States),
            Role::Plain => skip_members(first, map).map(|()| Member::Other),
        }
    }
}

/// Passes over the members of an object from its `first` key on.
fn skip_members<'de, A: MapAccess<'de>>(first: Option<Cow<'de, str>>, mut map: A) -> Result<(), A::Error> {
    let mut key = first;
    while key.is_some() {
        map.next_value_seed(Measure)?;
        key = map.next_key_seed(KeySeed)?;
    }
    Ok(())
}

/// The agents of a team state from its `first` key on, each with its `message_thread`.
fn read_states<'de, A: MapAccess<'de>>(
    first: Option<Cow<'de, str>>,
    mut map: A,
    budget: &RecordBudget,
) -> Result<DistinctKeys<Option<Thread>>, A::Error> {
    let mut states = DistinctKeys::default();
    let mut key = first;
    while let Some(k) = key {
        let thread = map.next_value_seed(StateSeed { budget })?;
        note_key(&mut states, k, thread, budget)?;
        key = map.next_key_seed(KeySeed)?;
    }
    Ok(states)
}

/// Reads an agent's state: its `message_thread` when it is an object holding a list there.
#[derive(Clone, Copy)]
struct StateSeed<'b> {
    budget: &'b RecordBudget,
}

impl<'de> DeserializeSeed<'de> for StateSeed<'_> {
    type Value = Option<Thread>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StateSeed<'_> {
    type Value = Option<Thread>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an agent's state")
    }

    scalars_read_as!(None);

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Measure.visit_seq(seq).map(|_| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut key = map.next_key_seed(KeySeed)?;
        if key.as_deref() == Some(RAW_VALUE_TOKEN) {
            return through_raw_value(&mut map, self).map(|(thread, _)| thread);
        }
        let (mut thread, mut occurrences) = (None, 0);
        while let Some(k) = key {
            if k == MESSAGE_THREAD {
                let value = map.next_value_seed(ValueSeed {
                    budget: self.budget,
                    role: Role::Plain,
                })?;
                thread = match value {
                    Member::List(shape) => Some(Thread {
                        occurrence: occurrences,
                        shape,
                    }),
                    _ => None,
                };
                occurrences += 1;
            } else {
                map.next_value_seed(Measure)?;
            }
            key = map.next_key_seed(KeySeed)?;
        }
        Ok(thread)
    }
}

/// Where a whole-document object's messages are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The members to go into, from the document down.
    pub(crate) path: Vec<PathStep>,
    /// What is there.
    pub(crate) target: Target,
}

/// A member to go into: the `occurrence`-th (0-based) of the members of `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathStep {
    /// The key.
    pub(crate) key: String,
    /// Which of its members.
    pub(crate) occurrence: usize,
}

/// What a whole-document object's messages are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// One list.
    List(ListShape),
    /// A `chat_messages` dict: the object's members, each a peer's conversation.
    Peers(Vec<Peer>),
}

/// A peer of a `chat_messages` dict and the conversation with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer {
    /// Its name (the key).
    pub(crate) name: String,
    /// Which member of its key holds the conversation (the last).
    pub(crate) occurrence: usize,
    /// The step of its first message: the entries of the peers before it.
    pub(crate) first_step: usize,
    /// The conversation.
    pub(crate) shape: ListShape,
}

impl Plan {
    /// This plan, one member deeper: within the `occurrence`-th member of `key`.
    fn within(mut self, key: &str, occurrence: usize) -> Plan {
        self.path.insert(
            0,
            PathStep {
                key: key.to_owned(),
                occurrence,
            },
        );
        self
    }
}

impl ObjectShape {
    /// Where the messages are, by [`super::agentchat::unwrap`]'s rules: none for a Claude Code
    /// record or a CommuGraph entry; else the first of [`LIST_KEYS`] holding a list; else
    /// within a wrapped object; else a team state's first agent with a `message_thread`;
    /// else a `chat_messages` dict.
    pub(crate) fn plan(&self) -> Option<Plan> {
        let excluded = CLAUDE_KEYS.iter().chain(&COMMUGRAPH_KEYS);
        if excluded.into_iter().any(|k| self.members.get(k).is_some()) {
            return None;
        }
        for key in LIST_KEYS {
            if let Some(Distinct {
                last: Member::List(shape),
                ..
            }) = self.members.get(key)
            {
                let at = PathStep {
                    key: key.to_owned(),
                    occurrence: self.members.get(key)?.last_occurrence(),
                };
                return Some(Plan {
                    path: vec![at],
                    target: Target::List(*shape),
                });
            }
        }
        for key in WRAPPER_KEYS {
            if let Some(
                member @ Distinct {
                    last: Member::Wrapper(inner),
                    ..
                },
            ) = self.members.get(key)
            {
                return inner
                    .plan()
                    .map(|plan| plan.within(key, member.last_occurrence()));
            }
        }
        if let Some(
            member @ Distinct {
                last: Member::States(states),
                ..
            },
        ) = self.members.get(AGENT_STATES)
        {
            return first_thread(states).map(|plan| plan.within(AGENT_STATES, member.last_occurrence()));
        }
        self.peers()
    }

    /// A `chat_messages` dict: every member a list of chat messages (or `null`s), one
    /// holding a message.
    fn peers(&self) -> Option<Plan> {
        let mut peers = Vec::new();
        let mut first_step = 0;
        for member in self.members.iter() {
            let Member::List(shape) = member.last else {
                return None;
            };
            if !shape.chat_or_null {
                return None;
            }
            peers.push(Peer {
                name: member.key.clone(),
                occurrence: member.last_occurrence(),
                first_step,
                shape,
            });
            first_step += shape.len;
        }
        peers.iter().any(|p| p.shape.not_only_null).then(|| Plan {
            path: Vec::new(),
            target: Target::Peers(peers),
        })
    }
}

/// The plan for a team state's first agent that has a `message_thread` list.
fn first_thread(states: &DistinctKeys<Option<Thread>>) -> Option<Plan> {
    states.iter().find_map(|state| {
        let thread = state.last?;
        let at = PathStep {
            key: MESSAGE_THREAD.to_owned(),
            occurrence: thread.occurrence,
        };
        let plan = Plan {
            path: vec![at],
            target: Target::List(thread.shape),
        };
        Some(plan.within(&state.key, state.last_occurrence()))
    })
}
