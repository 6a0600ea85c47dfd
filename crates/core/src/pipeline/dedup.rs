//! Deduplication (CONTRACT 3.2, `docs/spec/record-ordering.md` "Pre-Processing").
//!
//! Claude Code sometimes writes the same content twice. Four rules remove the copies; each
//! removed record is "aliased" to the kept record that holds its content, so that any
//! record pointing at a removed one is re-pointed at its kept twin:
//!
//! 1. **Same uuid**: a record repeating a uuid already seen (resumed sessions copy history).
//!    The first is kept.
//! 2. **Assistant signature**: assistant chunks with a signed thinking block whose
//!    `signature` (first 60 units), `message.id`, `requestId` and `timestamp` all match an
//!    earlier chunk. The first is kept.
//! 3. **Partial user copy**: user records with array content, grouped by
//!    `parentUuid|timestamp`: a record whose blocks all appear in a richer (or equally rich
//!    and earlier) kept record of the group goes. Unlike the reference, a record with a
//!    block found nowhere else is never dropped, so two parallel tool results that share a
//!    parent and a millisecond both survive.
//! 4. **Phantom branch**: the records hanging off a removed copy are compared with the
//!    children of its kept twin; a child repeating a kept sibling's content goes too (and
//!    its own children are compared in turn), while a child with new content stays and is
//!    re-parented onto the kept twin. So the phantom branch disappears and nothing whose
//!    content appears nowhere else is lost.
//!
//! Dedup is idempotent: run again on the records it kept, it removes nothing.

use std::borrow::Cow;
use std::collections::hash_map::{DefaultHasher, Entry};
use std::hash::{Hash, Hasher};

use foldhash::{HashMap, HashMapExt};

use crate::formats::claude_code::records::{Block, Content, Record, RecordKind};
use crate::json::utf16::prefix_utf16;

/// Why a record was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Rule 1: its uuid was already seen.
    SameUuid,
    /// Rule 2: a repeated assistant chunk.
    AssistantSignature,
    /// Rule 3: a partial copy of a richer user record.
    UserPartialCopy,
    /// Rule 4: a repeat, in a phantom branch, of a kept record.
    PhantomBranch,
}

impl DropReason {
    /// A short description for diagnostics.
    pub fn describe(self) -> &'static str {
        match self {
            DropReason::SameUuid => "repeats a uuid already seen",
            DropReason::AssistantSignature => {
                "repeats an assistant chunk (same signature, message, request and time)"
            }
            DropReason::UserPartialCopy => {
                "partial copy of a richer user record with the same parent and time"
            }
            DropReason::PhantomBranch => "repeats a kept record in a phantom branch",
        }
    }
}

/// The outcome of deduplication over a session's records.
#[derive(Debug, Clone, Default)]
pub struct Dedup {
    /// For each record (by index): why it was removed, or `None` when kept.
    pub dropped: Vec<Option<DropReason>>,
    /// For each removed record: the kept record holding its content (rules 2-4).
    pub twin: Vec<Option<usize>>,
    /// Removed uuid -> kept record, for re-pointing parents.
    alias: HashMap<String, usize>,
}

impl crate::heap::HeapSize for Dedup {
    fn heap_size(&self) -> usize {
        self.dropped.capacity() * std::mem::size_of::<Option<DropReason>>()
            + self.twin.heap_size()
            + self.alias.heap_size()
    }
}

impl Dedup {
    /// True when record `i` is kept.
    pub fn is_kept(&self, i: usize) -> bool {
        self.dropped.get(i).is_some_and(Option::is_none)
    }

    /// The uuid that `uuid` stands for after dedup: the kept twin's uuid when `uuid` was
    /// removed, else `uuid` itself.
    pub fn resolve<'a>(&self, records: &'a [Record], uuid: &'a str) -> &'a str {
        let mut current = uuid;
        // Aliases point at kept records, which a later rule may alias again: follow a few.
        for _ in 0..records.len().min(64) + 1 {
            match self.alias.get(current).and_then(|&i| records[i].uuid.as_deref()) {
                Some(next) if next != current => current = next,
                _ => break,
            }
        }
        current
    }

    fn drop(&mut self, i: usize, reason: DropReason, twin: Option<usize>, records: &[Record]) {
        self.dropped[i] = Some(reason);
        self.twin[i] = twin;
        if let (Some(t), Some(uuid)) = (twin, records[i].uuid.as_ref()) {
            self.alias.entry(uuid.to_string()).or_insert(t);
        }
    }
}

/// Rule 2's key: signature prefix, `message.id`, `requestId`, `timestamp`.
type SignatureKey<'a> = (Cow<'a, str>, Option<&'a str>, Option<&'a str>, Option<&'a str>);

/// Deduplicates `records` (in stream order: main file first). Records for which
/// `participates` is false are left alone and are not considered by any rule.
pub fn dedup_records(records: &[Record], participates: impl Fn(usize) -> bool) -> Dedup {
    let n = records.len();
    let mut d = Dedup {
        dropped: vec![None; n],
        twin: vec![None; n],
        alias: HashMap::new(),
    };
    let active: Vec<usize> = (0..n).filter(|&i| participates(i)).collect();
    d.drop_repeated_uuids(records, &active);
    // The copies removed by rules 2 and 3, each with its kept twin.
    let mut primary: Vec<(usize, usize)> = Vec::new();
    d.drop_repeated_assistant_chunks(records, &active, &mut primary);
    d.drop_partial_user_copies(records, &active, &mut primary);
    // Rule 4: phantom branches hanging off the copies removed by rules 2 and 3.
    if !primary.is_empty() {
        remove_phantom_branches(records, &active, &mut d, primary);
    }
    d
}

// Rules 1 to 3, each a pass over the `active` records (those taking part).
impl Dedup {
    /// Rule 1: same uuid. Drops each record repeating the uuid of an earlier one.
    fn drop_repeated_uuids(&mut self, records: &[Record], active: &[usize]) {
        let mut first_by_uuid: HashMap<&str, usize> = HashMap::with_capacity(active.len());
        for &i in active {
            if let Some(uuid) = records[i].uuid.as_deref() {
                match first_by_uuid.entry(uuid) {
                    Entry::Vacant(v) => {
                        v.insert(i);
                    }
                    Entry::Occupied(o) => {
                        // The uuid itself already names the kept record: no alias needed.
                        self.dropped[i] = Some(DropReason::SameUuid);
                        self.twin[i] = Some(*o.get());
                    }
                }
            }
        }
    }

    /// Rule 2: assistant chunks with the same signature key. Drops each kept chunk whose
    /// key an earlier kept chunk has, and pushes it onto `primary` with that chunk.
    fn drop_repeated_assistant_chunks(
        &mut self,
        records: &[Record],
        active: &[usize],
        primary: &mut Vec<(usize, usize)>,
    ) {
        let mut by_signature: HashMap<SignatureKey, usize> = HashMap::new();
        for &i in active {
            if !self.is_kept(i) {
                continue;
            }
            let Some(key) = signature_key(&records[i]) else {
                continue;
            };
            match by_signature.entry(key) {
                Entry::Vacant(v) => {
                    v.insert(i);
                }
                Entry::Occupied(o) => {
                    let kept = *o.get();
                    self.drop(i, DropReason::AssistantSignature, Some(kept), records);
                    primary.push((i, kept));
                }
            }
        }
    }

    /// Rule 3: partial user copies. In each group of [`Self::partial_copy_groups`], drops
    /// each record whose blocks all appear in a record kept before it, and pushes it onto
    /// `primary` with that record.
    fn drop_partial_user_copies(
        &mut self,
        records: &[Record],
        active: &[usize],
        primary: &mut Vec<(usize, usize)>,
    ) {
        for mut group in self.partial_copy_groups(records, active) {
            // Richest first; ties keep file order.
            group.sort_by_key(|&i| (std::cmp::Reverse(records[i].blocks().len()), i));
            let mut kept = KeptBlocks::default();
            for i in group {
                match kept.first_cover(records, i) {
                    Some(k) => {
                        self.drop(i, DropReason::UserPartialCopy, Some(k), records);
                        primary.push((i, k));
                    }
                    None => kept.keep(records, i),
                }
            }
        }
    }

    /// Rule 3's groups: the kept user records with array content, grouped by
    /// parentUuid|timestamp (both present and not empty). Groups of one record are left
    /// out; the others come in the order of their first records.
    fn partial_copy_groups(&self, records: &[Record], active: &[usize]) -> Vec<Vec<usize>> {
        let mut groups: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for &i in active {
            let r = &records[i];
            if !self.is_kept(i) || r.kind != RecordKind::User {
                continue;
            }
            let (Some(parent), Some(ts)) = (r.raw_parent(), r.timestamp.as_deref()) else {
                continue;
            };
            if parent.is_empty() || ts.is_empty() {
                continue;
            }
            if let Some(Content::Blocks(_)) = r.message.as_ref().map(|m| &m.content) {
                groups.entry((parent, ts)).or_default().push(i);
            }
        }
        let mut group_list: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
        group_list.sort_unstable_by_key(|g| g[0]);
        group_list
    }
}

/// Rule 2's key of `r`, when it is an assistant chunk with a signed thinking block.
fn signature_key(r: &Record) -> Option<SignatureKey<'_>> {
    if r.kind != RecordKind::Assistant {
        return None;
    }
    let signature = r.blocks().iter().find_map(|b| match b {
        Block::Thinking {
            signature: Some(s), ..
        } if !s.is_empty() => Some(s.text()),
        _ => None,
    })?;
    let signature = match signature {
        Cow::Borrowed(s) => Cow::Borrowed(prefix_utf16(s, 60)),
        Cow::Owned(s) => Cow::Owned(prefix_utf16(&s, 60).to_owned()),
    };
    Some((
        signature,
        r.message_id(),
        r.request_id.as_deref(),
        r.timestamp.as_deref(),
    ))
}

/// The records rule 3 kept in one group, in the order kept, with their blocks indexed by
/// hash: which kept record holds all of a record's blocks is found from the holders of its
/// rarest block, where comparing it with every kept record, block by block, was quadratic in
/// the group's size and in its records' blocks (40,000 user records sharing a parent and a
/// time took 27.6 s to export).
#[derive(Default)]
struct KeptBlocks {
    /// The kept records.
    kept: Vec<usize>,
    /// For each kept record (by its place in `kept`): its blocks' places, by hash.
    blocks: Vec<HashMap<u64, Vec<usize>>>,
    /// For each block hash: the places in `kept` of the records holding such a block,
    /// ascending.
    holders: HashMap<u64, Vec<usize>>,
}

impl KeptBlocks {
    /// The first kept record (in the order kept) holding every block of record `i`.
    fn first_cover(&self, records: &[Record], i: usize) -> Option<usize> {
        let blocks = records[i].blocks();
        let hashes: Vec<u64> = blocks.iter().map(block_hash).collect();
        let Some(rarest) = hashes
            .iter()
            .min_by_key(|h| self.holders.get(*h).map_or(0, Vec::len))
        else {
            // No blocks: every kept record holds them all.
            return self.kept.first().copied();
        };
        let holds = |place: usize, block: &Block, hash: u64| {
            let theirs = records[self.kept[place]].blocks();
            self.blocks[place]
                .get(&hash)
                .is_some_and(|at| at.iter().any(|&b| theirs[b] == *block))
        };
        self.holders
            .get(rarest)?
            .iter()
            .copied()
            .find(|&place| blocks.iter().zip(&hashes).all(|(b, &h)| holds(place, b, h)))
            .map(|place| self.kept[place])
    }

    /// Keeps record `i`, after the records kept before it.
    fn keep(&mut self, records: &[Record], i: usize) {
        let place = self.kept.len();
        let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
        for (at, block) in records[i].blocks().iter().enumerate() {
            let hash = block_hash(block);
            let places = by_hash.entry(hash).or_default();
            if places.is_empty() {
                self.holders.entry(hash).or_default().push(place);
            }
            places.push(at);
        }
        self.kept.push(i);
        self.blocks.push(by_hash);
    }
}

/// A hash of a block, equal for equal blocks (see `hash_block`).
fn block_hash(block: &Block) -> u64 {
    let mut h = DefaultHasher::new();
    hash_block(block, &mut h);
    h.finish()
}

fn remove_phantom_branches(
    records: &[Record],
    active: &[usize],
    d: &mut Dedup,
    primary: Vec<(usize, usize)>,
) {
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    for &i in active {
        if d.is_kept(i) {
            if let Some(p) = records[i].logical_or_parent() {
                children.entry(p).or_default().push(i);
            }
        }
    }
    let mut siblings_by_key: HashMap<&str, HashMap<u64, Vec<usize>>> = HashMap::new();
    let mut work = primary;
    while let Some((gone, twin)) = work.pop() {
        let (Some(gone_uuid), Some(twin_uuid)) =
            (records[gone].uuid.as_deref(), records[twin].uuid.as_deref())
        else {
            continue;
        };
        if gone_uuid == twin_uuid {
            continue;
        }
        let Some(orphaned) = children.get(gone_uuid) else {
            continue;
        };
        // Once per twin: rebuilt for each copy of the same record, this was quadratic in the
        // copies (20,000 signature copies of one assistant chunk, each with a child: 65 s).
        // Siblings dropped since are skipped when looked up.
        let by_key = siblings_by_key.entry(twin_uuid).or_insert_with(|| {
            let mut by_key: HashMap<u64, Vec<usize>> = HashMap::new();
            for &s in children.get(twin_uuid).map(Vec::as_slice).unwrap_or(&[]) {
                if d.is_kept(s) {
                    by_key.entry(content_key(&records[s])).or_default().push(s);
                }
            }
            by_key
        });
        for &c in orphaned {
            if !d.is_kept(c) {
                continue;
            }
            let same = by_key.get(&content_key(&records[c])).and_then(|cands| {
                cands
                    .iter()
                    .copied()
                    .find(|&s| s != c && d.is_kept(s) && same_content(&records[s], &records[c]))
            });
            if let Some(s) = same {
                d.drop(c, DropReason::PhantomBranch, Some(s), records);
                work.push((c, s));
            }
        }
    }
}

/// A hash of everything that makes two records "the same content" (not uuids or parents).
fn content_key(r: &Record) -> u64 {
    let mut h = DefaultHasher::new();
    r.kind.name().hash(&mut h);
    r.timestamp.hash(&mut h);
    r.message_id().hash(&mut h);
    r.request_id.hash(&mut h);
    r.subtype().hash(&mut h);
    r.system_content().hash(&mut h);
    r.is_meta.hash(&mut h);
    match r.message.as_ref().map(|m| &m.content) {
        Some(Content::Text(s)) => s.hash(&mut h),
        Some(Content::Blocks(blocks)) => {
            for b in blocks {
                hash_block(b, &mut h);
            }
        }
        _ => {}
    }
    h.finish()
}

fn hash_block(b: &Block, h: &mut DefaultHasher) {
    match b {
        Block::Text(t) => ("text", t).hash(h),
        Block::Thinking { thinking, signature } => ("thinking", thinking, signature).hash(h),
        Block::ToolUse(t) => ("tool_use", &t.id, &t.name, t.input.as_ref().map(|r| r.get())).hash(h),
        Block::ToolResult(t) => ("tool_result", &t.tool_use_id, &t.texts, t.is_error).hash(h),
        Block::Image(i) => ("image", &i.media_type, &i.data).hash(h),
        Block::Other(k) => ("other", k).hash(h),
    }
}

fn same_content(a: &Record, b: &Record) -> bool {
    a.kind == b.kind
        && a.timestamp == b.timestamp
        && a.message_id() == b.message_id()
        && a.request_id == b.request_id
        && a.subtype() == b.subtype()
        && a.system_content() == b.system_content()
        && a.is_meta == b.is_meta
        && a.message.as_ref().map(|m| &m.content) == b.message.as_ref().map(|m| &m.content)
}

#[cfg(test)]
mod tests {
    use crate::formats::claude_code::parse::parse_file;
    use crate::pipeline::dedup::*;

    fn load(lines: &[String]) -> Vec<Record> {
        parse_file(0, lines.join("\n").as_bytes()).records
    }

    fn user(uuid: &str, parent: &str, ts: &str, content: &str) -> String {
        format!(
            r#"{{"type":"user","uuid":"{uuid}","parentUuid":"{parent}","timestamp":"{ts}","message":{{"role":"user","content":{content}}}}}"#
        )
    }

    fn assistant(uuid: &str, parent: &str, ts: &str, sig: &str, text: &str) -> String {
        format!(
            r#"{{"type":"assistant","uuid":"{uuid}","parentUuid":"{parent}","timestamp":"{ts}","requestId":"r1","message":{{"id":"m1","content":[{{"type":"thinking","thinking":"{text}","signature":"{sig}"}}]}}}}"#
        )
    }

    fn kept_uuids(records: &[Record], d: &Dedup) -> Vec<String> {
        (0..records.len())
            .filter(|&i| d.is_kept(i))
            .map(|i| records[i].uuid.as_deref().unwrap().to_owned())
            .collect()
    }

    proptest::proptest! {
        /// The indexed search for a covering record decides as comparing each record with
        /// every kept one did: groups of records whose blocks are drawn from a few texts,
        /// repeats, escaped and plain spellings of the same text, and tool results.
        #[test]
        fn covers_found_by_index_are_those_found_by_comparing_every_pair(
            contents in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        r#"{"type":"text","text":"a"}"#,
                        r#"{"type":"text","text":"b"}"#,
                        r#"{"type":"text","text":"\u0062"}"#,
                        r#"{"type":"text","text":"c"}"#,
                        r#"{"type":"tool_result","tool_use_id":"t1","content":"x"}"#,
                        r#"{"type":"tool_result","tool_use_id":"t1","content":"x","is_error":true}"#,
                    ]),
                    0..5,
                ),
                1..9,
            ),
        ) {
            let lines: Vec<String> = contents
                .iter()
                .enumerate()
                .map(|(n, blocks)| user(&format!("u{n}"), "p", "t", &format!("[{}]", blocks.join(","))))
                .collect();
            let records = load(&lines);
            let mut group: Vec<usize> = (0..records.len()).collect();
            group.sort_by_key(|&i| (std::cmp::Reverse(records[i].blocks().len()), i));
            let (mut indexed, mut compared) = (KeptBlocks::default(), Vec::<usize>::new());
            for i in group {
                let by_index = indexed.first_cover(&records, i);
                let by_pairs = compared.iter().copied().find(|&k| {
                    records[i].blocks().iter().all(|b| records[k].blocks().contains(b))
                });
                proptest::prop_assert_eq!(by_index, by_pairs, "record {}", i);
                if by_index.is_none() {
                    indexed.keep(&records, i);
                    compared.push(i);
                }
            }
        }
    }

    /// Regression: 40,000 user records sharing a parent and a time, each with a block of
    /// its own, were each compared with every record kept before them (27.6 s to export in
    /// release). All are kept, in linear time; a record repeating one of them is dropped.
    #[test]
    fn a_large_group_of_distinct_user_records_is_deduplicated_in_linear_time() {
        let n = 40_000;
        let mut lines: Vec<String> = (0..n)
            .map(|i| {
                user(
                    &format!("u{i}"),
                    "p",
                    "t",
                    &format!(r#"[{{"type":"text","text":"t{i}"}}]"#),
                )
            })
            .collect();
        lines.push(user("copy", "p", "t", r#"[{"type":"text","text":"t7"}]"#));
        let records = load(&lines);
        let d = dedup_records(&records, |_| true);
        assert_eq!(kept_uuids(&records, &d).len(), n);
        assert_eq!(d.dropped[n], Some(DropReason::UserPartialCopy));
        assert_eq!(d.twin[n], Some(7));
    }

    /// Regression: rule 4 indexed the kept twin's children again for each copy of it (10,000
    /// signature copies of one assistant chunk, each with a child of its own, beside its
    /// 10,000 children: 12.6 s to export in release). The copies go, their children stay,
    /// and a child repeating one of the twin's goes.
    #[test]
    fn many_copies_of_one_chunk_with_children_are_deduplicated_in_linear_time() {
        let n = 10_000;
        let mut lines = vec![assistant("a0", "root", "t0", "SIG", "hm")];
        lines.extend((0..n).map(|j| user(&format!("c{j}"), "a0", &format!("tc{j}"), &format!(r#""c{j}""#))));
        for i in 0..n {
            lines.push(assistant(&format!("a{}", i + 1), "root", "t0", "SIG", "hm"));
            lines.push(user(
                &format!("d{i}"),
                &format!("a{}", i + 1),
                "td",
                &format!(r#""d{i}""#),
            ));
        }
        lines.push(assistant("again", "root", "t0", "SIG", "hm"));
        lines.push(user("repeat", "again", "tc3", r#""c3""#));
        let records = load(&lines);
        let d = dedup_records(&records, |_| true);
        let dropped = |reason| d.dropped.iter().filter(|r| **r == Some(reason)).count();
        assert_eq!(dropped(DropReason::AssistantSignature), n + 1);
        assert_eq!(dropped(DropReason::PhantomBranch), 1);
        let repeat = records
            .iter()
            .position(|r| r.uuid.as_deref() == Some("repeat"))
            .unwrap();
        assert_eq!(records[d.twin[repeat].unwrap()].uuid.as_deref(), Some("c3"));
    }

    #[test]
    fn repeated_uuids_keep_the_first() {
        let recs = load(&[
            user("a", "root", "t1", r#""hello there""#),
            user("a", "root", "t1", r#""hello there""#),
        ]);
        let d = dedup_records(&recs, |_| true);
        assert_eq!(d.dropped, vec![None, Some(DropReason::SameUuid)]);
    }

    #[test]
    fn signature_duplicates_and_their_phantom_branch_go() {
        let recs = load(&[
            user("u", "root", "t0", r#""q""#),
            assistant("a1", "u", "t1", "SIG", "think"),
            user("r1", "a1", "t2", r#"[{"type":"text","text":"next"}]"#),
            assistant("a2", "x", "t1", "SIG", "think"),
            user("r2", "a2", "t2", r#"[{"type":"text","text":"next"}]"#),
            user("r3", "a2", "t3", r#"[{"type":"text","text":"only here"}]"#),
        ]);
        let d = dedup_records(&recs, |_| true);
        assert_eq!(d.dropped[3], Some(DropReason::AssistantSignature));
        assert_eq!(d.dropped[4], Some(DropReason::PhantomBranch));
        assert_eq!(d.dropped[5], None, "unique content is never lost");
        assert_eq!(d.resolve(&recs, "a2"), "a1");
        assert_eq!(d.resolve(&recs, "r2"), "r1");
        assert_eq!(kept_uuids(&recs, &d), ["u", "a1", "r1", "r3"]);
    }

    #[test]
    fn partial_user_copies_keep_the_richest() {
        let recs = load(&[
            user(
                "full",
                "p",
                "t",
                r#"[{"type":"image","source":{"type":"base64","data":"A"}},{"type":"text","text":"see"}]"#,
            ),
            user(
                "part",
                "p",
                "t",
                r#"[{"type":"image","source":{"type":"base64","data":"A"}}]"#,
            ),
        ]);
        let d = dedup_records(&recs, |_| true);
        assert_eq!(d.dropped, vec![None, Some(DropReason::UserPartialCopy)]);
        assert_eq!(d.twin[1], Some(0));
    }

    #[test]
    fn parallel_tool_results_with_the_same_parent_and_time_both_stay() {
        let recs = load(&[
            user(
                "r1",
                "p",
                "t",
                r#"[{"type":"tool_result","tool_use_id":"t1","content":"a"}]"#,
            ),
            user(
                "r2",
                "p",
                "t",
                r#"[{"type":"tool_result","tool_use_id":"t2","content":"b"}]"#,
            ),
        ]);
        let d = dedup_records(&recs, |_| true);
        assert_eq!(d.dropped, vec![None, None]);
    }

    #[test]
    fn dedup_is_idempotent() {
        let recs = load(&[
            user("u", "root", "t0", r#""q""#),
            assistant("a1", "u", "t1", "SIG", "think"),
            assistant("a2", "x", "t1", "SIG", "think"),
            user("r2", "a2", "t2", r#"[{"type":"text","text":"next"}]"#),
            user("r2", "a2", "t2", r#"[{"type":"text","text":"next"}]"#),
        ]);
        let first = dedup_records(&recs, |_| true);
        let kept: Vec<Record> = (0..recs.len())
            .filter(|&i| first.is_kept(i))
            .map(|i| recs[i].clone())
            .collect();
        let second = dedup_records(&kept, |_| true);
        assert!(second.dropped.iter().all(Option::is_none));
    }

    #[test]
    fn records_left_out_are_not_considered() {
        let recs = load(&[user("a", "r", "t", r#""x""#), user("a", "r", "t", r#""x""#)]);
        let d = dedup_records(&recs, |i| i == 1);
        assert_eq!(d.dropped, vec![None, None]);
    }
}
