//! Who a label request is made as, and for whom it may act (pure).
//!
//! Three kinds of caller, told apart by the API keys (see `crate::api::auth`):
//! - on a server where no key is named (no keys at all, or only plain keys), the request is
//!   taken at its word: it acts for the annotator it names;
//! - a named key `NAME:KEY` is NAME: it acts for NAME only, unless NAME is a reviewer, who
//!   may act for anyone;
//! - a plain key on a server where other keys are named acts for the annotators it names,
//!   except those that have a named key and the reviewers: otherwise a shared service key
//!   could write, adjudicate or read blind as any member of the team.
//!
//! An `adjudicated` set is always a reviewer's own. History records who wrote a change
//! (the named key's annotator) apart from whose set it changed.

/// Why a caller may not do what it asks (act for an annotator, write a set): the message
/// a 403 carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Forbidden(String);

impl Forbidden {
    /// A refusal saying `why`.
    pub(super) fn new(why: String) -> Forbidden {
        Forbidden(why)
    }
}

/// Who a label request is made as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller<'a> {
    /// No key is named on this server: the request acts for whoever it names.
    Anyone,
    /// A named API key: its annotator.
    Named(&'a str),
    /// A plain key on a server where keys are named (`named`: their annotators, sorted).
    Unnamed {
        /// The annotators of the named keys, sorted.
        named: &'a [String],
    },
}

impl<'a> Caller<'a> {
    /// Whether this caller may act for `annotator` (write or remove their set, take units
    /// for them, read as them), with `reviewers` the configured reviewers. `Err` says why
    /// not, for a 403.
    pub fn may_act_for(&self, annotator: &str, reviewers: &[String]) -> Result<(), Forbidden> {
        let is_reviewer = |name: &str| reviewers.iter().any(|r| r == name);
        match *self {
            Caller::Anyone => Ok(()),
            Caller::Named(me) if me == annotator || is_reviewer(me) => Ok(()),
            Caller::Named(me) => Err(Forbidden(format!(
                "the API key is {me}'s: it may not act for {}",
                crate::core::json::utf16::echo(annotator)
            ))),
            Caller::Unnamed { named } => {
                if named.binary_search_by(|n| n.as_str().cmp(annotator)).is_ok() || is_reviewer(annotator) {
                    Err(Forbidden(format!(
                        "{} has a named API key or is a reviewer: a key without a name may not act for them",
                        crate::core::json::utf16::echo(annotator)
                    )))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Whether this caller may create, close and reopen rounds: a request on a server
    /// without named keys, a plain key (the operator's), a reviewer's named key, or any
    /// named key when no reviewer is configured.
    pub fn may_manage_rounds(&self, reviewers: &[String]) -> Result<(), Forbidden> {
        match *self {
            Caller::Anyone | Caller::Unnamed { .. } => Ok(()),
            Caller::Named(me) if reviewers.is_empty() || reviewers.iter().any(|r| r == me) => Ok(()),
            Caller::Named(me) => Err(Forbidden(format!(
                "rounds are managed by reviewers; {me} is not one"
            ))),
        }
    }

    /// Who history records as the author of a change to `annotator`'s set: the named key's
    /// annotator, else the annotator the request acts for.
    pub fn actor<'s>(&'s self, annotator: &'s str) -> &'s str {
        match self {
            Caller::Named(me) => me,
            Caller::Anyone | Caller::Unnamed { .. } => annotator,
        }
    }

    /// The named key's annotator, if the request presented one.
    pub fn named(&self) -> Option<&'a str> {
        match self {
            Caller::Named(me) => Some(me),
            Caller::Anyone | Caller::Unnamed { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reviewers() -> Vec<String> {
        vec!["lead".to_owned()]
    }

    #[test]
    fn rounds_are_managed_by_reviewers_and_the_operator() {
        assert!(Caller::Anyone.may_manage_rounds(&reviewers()).is_ok());
        assert!(Caller::Named("lead").may_manage_rounds(&reviewers()).is_ok());
        assert!(Caller::Named("alice").may_manage_rounds(&reviewers()).is_err());
        assert!(
            Caller::Named("alice").may_manage_rounds(&[]).is_ok(),
            "no reviewer: any key"
        );
        let named = ["alice".to_owned()];
        assert!(Caller::Unnamed { named: &named }
            .may_manage_rounds(&reviewers())
            .is_ok());
    }

    #[test]
    fn an_open_server_takes_the_request_at_its_word() {
        for name in ["alice", "lead", "anyone"] {
            assert!(Caller::Anyone.may_act_for(name, &reviewers()).is_ok());
        }
        assert_eq!(Caller::Anyone.actor("alice"), "alice");
    }

    #[test]
    fn a_named_key_acts_for_itself_and_a_reviewer_for_anyone() {
        let alice = Caller::Named("alice");
        assert!(alice.may_act_for("alice", &reviewers()).is_ok());
        assert!(alice.may_act_for("bob", &reviewers()).is_err());
        let lead = Caller::Named("lead");
        assert!(lead.may_act_for("bob", &reviewers()).is_ok());
        assert_eq!(
            lead.actor("bob"),
            "lead",
            "history names who wrote, not whose set"
        );
    }

    /// Regression (F4): with named keys, one plain key and `--reviewer lead`, the plain key
    /// adjudicated as `lead` and overwrote `bob`'s set.
    #[test]
    fn f4_a_plain_key_may_not_act_for_a_named_key_or_a_reviewer() {
        let named = vec!["alice".to_owned(), "bob".to_owned()];
        let plain = Caller::Unnamed { named: &named };
        assert!(plain.may_act_for("bob", &reviewers()).is_err());
        assert!(plain.may_act_for("lead", &reviewers()).is_err());
        assert!(plain.may_act_for("importer", &reviewers()).is_ok());
        assert_eq!(plain.named(), None);
    }
}
