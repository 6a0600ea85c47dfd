//! Lanes: the main agent and each sub-agent, the record each record belongs to, and the
//! order the lanes are shown in.

use foldhash::{HashMap, HashMapExt};

use super::subagents::Agent;
use crate::formats::claude_code::records::Record;
use crate::heap::HeapSize;

/// A lane of the workflow: the main agent, or one sub-agent.
#[derive(Debug, Clone)]
pub struct Lane {
    /// `main` or `agent-<id>`.
    pub id: String,
    /// The sub-agent, for sub-agent lanes.
    pub agent: Option<usize>,
}

/// The lanes (main, then one per agent) and each record's lane: a sub-agent log's records
/// are its agent's; a sidechain record of the main log with an `agentId` is that agent's
/// (an agent created for it if linking had none).
pub(crate) fn assign_lanes(
    records: &[Record],
    agents: &mut Vec<Agent>,
    files: usize,
) -> (Vec<Lane>, Vec<usize>) {
    let mut lanes = vec![Lane {
        id: "main".to_owned(),
        agent: None,
    }];
    let mut lane_of_agent: HashMap<String, usize> = HashMap::new();
    let mut file_lane = vec![0usize; files];
    for (a, agent) in agents.iter().enumerate() {
        lane_of_agent.insert(agent.agent_id.clone(), lanes.len());
        if let Some(f) = agent.file {
            file_lane[f] = lanes.len();
        }
        lanes.push(Lane {
            id: format!("agent-{}", agent.agent_id),
            agent: Some(a),
        });
    }
    let record_lane = records
        .iter()
        .map(|r| {
            match (
                file_lane[r.pos.file as usize],
                r.is_sidechain,
                r.agent_id.as_deref(),
            ) {
                (0, Some(true), Some(id)) => *lane_of_agent.entry(id.to_owned()).or_insert_with(|| {
                    agents.push(Agent {
                        agent_id: id.to_owned(),
                        ..Agent::default()
                    });
                    lanes.push(Lane {
                        id: format!("agent-{id}"),
                        agent: Some(agents.len() - 1),
                    });
                    lanes.len() - 1
                }),
                (lane, ..) => lane,
            }
        })
        .collect();
    (lanes, record_lane)
}

impl HeapSize for Lane {
    fn heap_size(&self) -> usize {
        self.id.heap_size()
    }
}
