//! The routing and the dropping of copied conversations written the plain way: names
//! compared and lists searched, in quadratic time. Kept as the reference that
//! [`super::route`] and [`super::drop_copies`] are checked against
//! (`autogen::read::whole_document`, `autogen::read`'s property test).

use super::{Draft, Route, TOOLS};
use crate::formats::autogen::AgMessage;

/// [`super::route`]'s rules, each found by searching the drafts.
pub(crate) fn route_by_names(mut drafts: Vec<Draft>, peer: Option<&str>) -> Vec<AgMessage> {
    name_unnamed_callers_by_search(&mut drafts, peer);
    let giver = drafts.iter().find(|d| d.speaks).map(|d| d.message.sender.clone());
    let swarm = drafts.iter().any(|d| matches!(d.route, Route::Handoff(_)));
    let receivers: Vec<Option<String>> = (0..drafts.len())
        .map(|i| receiver_by_search(&drafts, i, giver.as_deref(), swarm))
        .collect();
    drafts
        .into_iter()
        .zip(receivers)
        .map(|(d, receiver)| AgMessage {
            receiver,
            ..d.message
        })
        .collect()
}

/// Gives each call without a name its sender as [`super::route`] does, searching the
/// drafts for the result answering the call and for the parties.
fn name_unnamed_callers_by_search(drafts: &mut [Draft], peer: Option<&str>) {
    let n = drafts.len();
    for i in 0..n {
        if !drafts[i].unnamed_call {
            continue;
        }
        let executor = (i + 1..n)
            .find(|&j| drafts[j].route == Route::Caller)
            .map(|j| drafts[j].message.sender.clone());
        let Some(executor) = executor.filter(|e| e != TOOLS) else {
            continue;
        };
        let mut parties: Vec<String> = peer.into_iter().map(str::to_owned).collect();
        for d in drafts.iter().filter(|d| d.speaks && !d.unnamed_call) {
            if !parties.contains(&d.message.sender) {
                parties.push(d.message.sender.clone());
            }
        }
        let other = if parties.len() == 2 && parties.contains(&executor) {
            parties.into_iter().find(|p| *p != executor)
        } else {
            peer.filter(|p| *p != executor).map(str::to_owned)
        };
        if let Some(other) = other {
            drafts[i].message.sender = other;
        }
    }
}

/// The receiver of draft `i`, as [`super::route`] gives it, found by searching the drafts
/// around it; `giver` is the task giver (the first speaker), `swarm` true when any draft
/// is a handoff.
fn receiver_by_search(drafts: &[Draft], i: usize, giver: Option<&str>, swarm: bool) -> Option<String> {
    let n = drafts.len();
    let sender = |d: &Draft| d.message.sender.clone();
    let me = drafts[i].message.sender.clone();
    let speaker = |j: &usize| drafts[*j].speaks && drafts[*j].message.sender != me;
    let next = (i + 1..n).find(speaker).map(|j| sender(&drafts[j]));
    let previous = (0..i).rev().find(speaker).map(|j| sender(&drafts[j]));
    let turn = next
        .clone()
        .or(previous)
        .or_else(|| (me != "user").then(|| "user".to_owned()));
    let caller = (0..i)
        .rev()
        .find(|&j| drafts[j].route == Route::Call)
        .map(|j| sender(&drafts[j]));
    let handoff = (0..i)
        .rev()
        .find(|&j| matches!(drafts[j].route, Route::Handoff(_)));
    let d = &drafts[i];
    let final_answer = d.terminates && next.is_none() && !d.message.human && giver.is_some_and(|g| g != me);
    let receiver = match &d.route {
        Route::Nobody => None,
        Route::To(party) | Route::Handoff(party) => Some(party.clone()),
        Route::Call => Some(
            (i + 1..n)
                .find(|&j| drafts[j].route == Route::Caller)
                .map_or_else(|| TOOLS.to_owned(), |j| sender(&drafts[j])),
        ),
        Route::Caller => caller.or(turn),
        Route::Turn if final_answer => giver.map(str::to_owned),
        Route::Turn if swarm => match handoff {
            Some(h) => {
                let Route::Handoff(holder) = &drafts[h].route else {
                    unreachable!()
                };
                Some(if *holder == me {
                    sender(&drafts[h])
                } else {
                    holder.clone()
                })
            }
            None => giver.filter(|g| *g != me).map(str::to_owned).or(turn),
        },
        Route::Turn => turn,
    };
    receiver.filter(|r| *r != me)
}

/// [`super::drop_copies`]'s rule: a conversation is dropped when one before it has the
/// same senders and texts at the same places.
pub(crate) fn drop_copies_by_search(conversations: &mut [(usize, Vec<AgMessage>)]) {
    let original: Vec<(usize, Vec<AgMessage>)> = conversations.to_vec();
    let same = |(f1, a): &(usize, Vec<AgMessage>), (f2, b): &(usize, Vec<AgMessage>)| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x.step - f1, &x.sender, &x.content) == (y.step - f2, &y.sender, &y.content))
    };
    for q in 0..original.len() {
        if !original[q].1.is_empty() && (0..q).any(|p| same(&original[p], &original[q])) {
            conversations[q].1.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::formats::autogen::agentchat::reference::*;
    use crate::formats::autogen::agentchat::{drop_copies, route};
    use crate::formats::autogen::ToolPart;

    /// A draft among a few parties, of any route, with any of the flags routing reads.
    fn draft() -> impl Strategy<Value = Draft> {
        let party = || prop::sample::select(vec!["user", "a", "b", "c", TOOLS]);
        let route = prop_oneof![
            4 => Just(Route::Turn),
            1 => party().prop_map(|p| Route::To(p.to_owned())),
            1 => party().prop_map(|p| Route::Handoff(p.to_owned())),
            2 => Just(Route::Call),
            2 => Just(Route::Caller),
            1 => Just(Route::Nobody),
        ];
        (party(), route, any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(sender, route, terminates, unnamed, human)| {
                let result = route == Route::Caller;
                Draft {
                    speaks: !result && route != Route::Nobody,
                    terminates: terminates && route == Route::Turn,
                    unnamed_call: unnamed && route == Route::Call,
                    message: AgMessage {
                        step: 0,
                        timestamp: String::new(),
                        sender: sender.to_owned(),
                        receiver: None,
                        message_type: "response",
                        content: format!("{sender}:{terminates}"),
                        human,
                        tools: Vec::new(),
                    },
                    route,
                }
            },
        )
    }

    fn drafts() -> impl Strategy<Value = Vec<Draft>> {
        prop::collection::vec(draft(), 0..14).prop_map(|mut drafts| {
            for (step, d) in drafts.iter_mut().enumerate() {
                d.message.step = step;
            }
            drafts
        })
    }

    fn copy(drafts: &[Draft]) -> Vec<Draft> {
        drafts
            .iter()
            .map(|d| Draft {
                message: d.message.clone(),
                route: d.route.clone(),
                speaks: d.speaks,
                terminates: d.terminates,
                unnamed_call: d.unnamed_call,
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// The routing by index gives every draft the receiver the plain search gives it.
        #[test]
        fn routing_by_index_agrees_with_the_plain_search(
            drafts in drafts(),
            peer in proptest::option::of(prop::sample::select(vec!["a", "b", "peer"])),
        ) {
            let want = route_by_names(copy(&drafts), peer);
            let got = route(drafts, peer, |_| true).unwrap();
            prop_assert_eq!(got, want);
        }

        /// Dropping copies with hashes drops what comparing every pair drops.
        #[test]
        fn dropping_copies_agrees_with_the_plain_search(
            lists in prop::collection::vec(
                prop::collection::vec((prop::sample::select(vec!["a", "b"]), 0u8..2, 0usize..2), 0..4),
                0..6,
            ),
        ) {
            // Each list's entries, some of them dropped (a gap in the steps).
            let mut first = 0;
            let mut conversations: Vec<(usize, Vec<AgMessage>)> = Vec::new();
            for list in &lists {
                let mut step = first;
                let mut messages = Vec::new();
                for (sender, text, gap) in list {
                    step += gap;
                    messages.push(AgMessage {
                        step,
                        timestamp: String::new(),
                        sender: (*sender).to_owned(),
                        receiver: None,
                        message_type: "response",
                        content: text.to_string(),
                        human: false,
                        tools: Vec::<ToolPart>::new(),
                    });
                    step += 1;
                }
                conversations.push((first, messages));
                first = step + 1;
            }
            let mut searched = conversations.clone();
            drop_copies_by_search(&mut searched);
            drop_copies(&mut conversations);
            prop_assert_eq!(conversations, searched);
        }
    }
}
