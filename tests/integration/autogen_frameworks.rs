//! Issue 33: AutoGen logs as the frameworks themselves write them (AgentChat 0.7 and AG2
//! runs under `fixtures/autogen/{agentchat,ag2}/`, made by the scripts in
//! `fixtures/autogen/generate/`) keep their structure in the communication graph. One
//! regression test per finding, each asserting the graph's exact edges per pair.

use reqwest::StatusCode;
use serde_json::Value;

use crate::server::{Options, TestServer};

/// An edge: (source, target, weight).
pub(crate) type Edge = (&'static str, &'static str, u64);

/// `selector_planner.json`: a SelectorGroupChat whose planner delegates and gets the answer
/// back after each agent's turn; the selections (`SelectorEvent`, `SelectSpeakerEvent`) are
/// no messages.
pub(crate) const SELECTOR_PLANNER: &[Edge] = &[
    ("user", "planner", 1),
    ("planner", "web_search", 2),
    ("planner", "data_analyst", 1),
    ("planner", "user", 1),
    ("web_search", "tools", 3),
    ("web_search", "planner", 2),
    ("tools", "web_search", 3),
    ("tools", "data_analyst", 1),
    ("data_analyst", "tools", 1),
    ("data_analyst", "planner", 1),
];

/// `swarm_handoffs.json`: planner -> analyst -> writer -> planner by handoffs; each agent
/// answers the one who handed it control.
pub(crate) const SWARM_HANDOFFS: &[Edge] = &[
    ("user", "planner", 1),
    ("planner", "tools", 1),
    ("planner", "analyst", 1),
    ("planner", "user", 1),
    ("tools", "planner", 1),
    ("tools", "analyst", 2),
    ("tools", "writer", 1),
    ("analyst", "tools", 2),
    ("analyst", "planner", 1),
    ("analyst", "writer", 1),
    ("writer", "analyst", 1),
    ("writer", "tools", 1),
    ("writer", "planner", 1),
];

/// `round_robin_termination.json`: a writer and a critic in turns; the critic's TERMINATE
/// answers the user who gave the task.
pub(crate) const ROUND_ROBIN_TERMINATION: &[Edge] = &[
    ("user", "writer", 1),
    ("writer", "critic", 2),
    ("critic", "writer", 1),
    ("critic", "user", 1),
];

/// `round_robin_user_proxy.json`: an assistant and a human behind a UserProxyAgent.
pub(crate) const ROUND_ROBIN_USER_PROXY: &[Edge] = &[
    ("user", "assistant", 1),
    ("assistant", "user_proxy", 2),
    ("user_proxy", "assistant", 2),
];

/// `tool_error_parallel.json`: two calls in one request, one failing.
pub(crate) const TOOL_ERROR_PARALLEL: &[Edge] = &[
    ("user", "assistant", 1),
    ("assistant", "tools", 2),
    ("assistant", "user", 1),
    ("tools", "assistant", 2),
];

/// The AG2 group chat, in each of the three forms AG2 keeps it.
pub(crate) const AG2_GROUP_CHAT: &[Edge] = &[
    ("admin", "planner", 1),
    ("planner", "coder", 1),
    ("planner", "admin", 1),
    ("coder", "critic", 2),
    ("critic", "coder", 1),
    ("critic", "planner", 1),
];

/// The AG2 chat whose user_proxy runs the weather agent's tools, in each form AG2 keeps it.
pub(crate) const AG2_TOOLS: &[Edge] = &[
    ("user_proxy", "weather_agent", 3),
    ("weather_agent", "user_proxy", 3),
];

/// A session of one fixture file, uploaded.
struct Loaded {
    id: String,
    graph: Value,
    units: Value,
}

async fn load(server: &TestServer, rel: &str) -> Loaded {
    let id = server.upload_fixture("autogen", rel).await;
    let graph = server.get(&format!("/api/graph/{id}")).await;
    assert_eq!(graph.status, StatusCode::OK, "{rel}: {}", graph.json);
    let units = server.get(&format!("/api/graph/{id}/annotations")).await;
    assert_eq!(units.status, StatusCode::OK, "{rel}: {}", units.json);
    Loaded {
        id,
        graph: graph.json,
        units: units.json,
    }
}

/// The graph's edges as (source, target, weight), in the body's order.
pub(crate) fn edges(graph: &Value) -> Vec<(String, String, u64)> {
    graph["graph"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap().to_owned(),
                e["target"].as_str().unwrap().to_owned(),
                e["weight"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub(crate) fn owned(expected: &[Edge]) -> Vec<(String, String, u64)> {
    expected
        .iter()
        .map(|(s, t, w)| ((*s).to_owned(), (*t).to_owned(), *w))
        .collect()
}

fn node_ids(graph: &Value) -> Vec<&str> {
    graph["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect()
}

/// The unit `M:<step>`.
fn unit(units: &Value, step: usize) -> &Value {
    let event = format!("M:{step}");
    units["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["event_id"] == event.as_str())
        .unwrap_or_else(|| panic!("no unit {event}"))
}

/// The interactions of the edge `source -> target`.
fn interactions<'a>(graph: &'a Value, source: &str, target: &str) -> &'a Vec<Value> {
    graph["graph"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["source"] == source && e["target"] == target)
        .unwrap_or_else(|| panic!("no edge {source} -> {target}"))["interactions"]
        .as_array()
        .unwrap()
}

/// Item 1: the selector's choices (`SelectorEvent`, then `SelectSpeakerEvent`, both from
/// `SelectorGroupChatManager`) were speaker turns and messages to the selected speaker:
/// every agent's message went to the manager, each selection counted twice, and the
/// planner's delegations were lost. A selection is no message: the selected speaker's
/// message answers the previous speaker's, as in any turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_selector_chat_is_not_a_star_around_the_manager() {
    let server = TestServer::start(Options::default()).await;
    let s = load(&server, "autogen/agentchat/selector_planner.json").await;
    assert_eq!(edges(&s.graph), owned(SELECTOR_PLANNER));
    assert_eq!(
        node_ids(&s.graph),
        ["user", "planner", "web_search", "tools", "data_analyst"],
        "the manager is no party"
    );
    // 29 entries, 14 of them the 7 selections.
    assert_eq!(s.graph["graph"]["metadata"]["message_count"], 15);
    assert_eq!(s.units["total"], 15);
    // The planner's delegations, each at its step.
    let delegations: Vec<u64> = interactions(&s.graph, "planner", "web_search")
        .iter()
        .chain(interactions(&s.graph, "planner", "data_analyst"))
        .map(|i| i["step_index"].as_u64().unwrap())
        .collect();
    assert_eq!(delegations, [3, 12, 20]);
    let cut = server.get(&format!("/api/graph/{}?step=9", s.id)).await;
    assert_eq!(
        edges(&cut.json),
        owned(&[
            ("user", "planner", 1),
            ("planner", "web_search", 1),
            ("web_search", "tools", 1),
            ("web_search", "planner", 1),
            ("tools", "web_search", 1),
        ]),
        "?step=9"
    );
    server.stop().await;
}

/// Item 2: a `ThoughtEvent` (the model's reasoning before its call) was a message to the
/// next speaker. It addresses nobody, as Claude Code's thinking does, and takes no turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_thought_addresses_nobody() {
    let server = TestServer::start(Options::default()).await;
    let s = load(&server, "autogen/agentchat/selector_planner.json").await;
    let thought = unit(&s.units, 6);
    assert_eq!(thought["actor_id"], "web_search");
    assert_eq!(thought["message_type"], "thought");
    assert!(thought.get("receiver").is_none(), "{thought}");
    let steps: Vec<u64> = s.graph["graph"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["interactions"].as_array().unwrap())
        .map(|i| i["step_index"].as_u64().unwrap())
        .collect();
    assert!(!steps.contains(&6), "no interaction at the thought's step");
    assert_eq!(edges(&s.graph), owned(SELECTOR_PLANNER));
    // The notebook's run: its thought (step 5) went to DataAnalystAgent.
    let n = load(&server, "autogen/agentchat/selector_messages.json").await;
    assert!(unit(&n.units, 5).get("receiver").is_none());
    assert_eq!(
        edges(&n.graph),
        owned(crate::autogen::SELECTOR_NOTEBOOK),
        "WebSearchAgent -> DataAnalystAgent counts 3, not 4"
    );
    server.stop().await;
}

/// Item 3: the message that ends a run with its termination (`TERMINATE`) went to the
/// previous speaker; it is the answer to the task, and goes to the task giver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_final_answer_goes_to_the_task_giver() {
    let server = TestServer::start(Options::default()).await;
    let s = load(&server, "autogen/agentchat/round_robin_termination.json").await;
    assert_eq!(edges(&s.graph), owned(ROUND_ROBIN_TERMINATION));
    let last = unit(&s.units, 4);
    assert_eq!(
        (&last["actor_id"], &last["receiver"]),
        (&"critic".into(), &"user".into())
    );
    for (rel, giver, sender, step) in [
        ("autogen/agentchat/selector_planner.json", "user", "planner", 28),
        ("autogen/agentchat/swarm_handoffs.json", "user", "planner", 14),
        ("autogen/agentchat/swarm_task_result.json", "user", "planner", 26),
        ("autogen/ag2/groupchat_messages.json", "admin", "planner", 6),
    ] {
        let s = load(&server, rel).await;
        let last = unit(&s.units, step);
        assert_eq!(last["actor_id"], sender, "{rel}");
        assert_eq!(last["receiver"], giver, "{rel}");
    }
    // A human who ends it (the user proxy's APPROVE) answers the agent, as any turn.
    let h = load(&server, "autogen/agentchat/round_robin_user_proxy.json").await;
    assert_eq!(unit(&h.units, 6)["receiver"], "assistant");
    server.stop().await;
}

/// Item 4: in a swarm, the analyst's tool summary went to the writer, who had not yet been
/// handed control (the next speaker). The agent holding control answers whoever handed it
/// control; anyone else addresses the agent holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_swarm_messages_follow_who_holds_control() {
    let server = TestServer::start(Options::default()).await;
    let s = load(&server, "autogen/agentchat/swarm_handoffs.json").await;
    assert_eq!(edges(&s.graph), owned(SWARM_HANDOFFS));
    for (step, sender, receiver) in [
        (3, "planner", "analyst"), // the handoff
        (6, "analyst", "planner"), // the tool summary: to whoever handed it control
        (9, "analyst", "writer"),  // the handoff
        (10, "writer", "analyst"), // the writer's report
        (13, "writer", "planner"), // the handoff
        (14, "planner", "user"),   // the final answer
    ] {
        let u = unit(&s.units, step);
        assert_eq!(u["actor_id"], sender, "M:{step}");
        assert_eq!(u["receiver"], receiver, "M:{step}");
    }
    let notebook = load(&server, "autogen/agentchat/swarm_task_result.json").await;
    assert_eq!(edges(&notebook.graph), owned(crate::autogen::SWARM_NOTEBOOK));
    server.stop().await;
}

/// Item 5: AG2's tool results carry the executing agent's `name` (`user_proxy`) and were
/// credited to an invented `tools` party; the calls (AG2 writes them without a name) went
/// there too, or came from `assistant`, the role. A result comes from its `name`; a call
/// goes to whoever answers it and comes from the other party.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_ag2_tool_results_come_from_the_named_executor() {
    let server = TestServer::start(Options::default()).await;
    for rel in [
        "autogen/ag2/tools_chat_result.json",
        "autogen/ag2/tools_user_proxy_chat_messages.json",
        "autogen/ag2/tools_weather_agent_chat_messages.json",
    ] {
        let s = load(&server, rel).await;
        assert_eq!(edges(&s.graph), owned(AG2_TOOLS), "{rel}");
        assert_eq!(node_ids(&s.graph), ["user_proxy", "weather_agent"], "{rel}");
        let (call, result) = (unit(&s.units, 1), unit(&s.units, 2));
        assert_eq!(
            (&call["actor_id"], &call["receiver"]),
            (&"weather_agent".into(), &"user_proxy".into()),
            "{rel}"
        );
        assert_eq!(
            (&result["actor_id"], &result["receiver"]),
            (&"user_proxy".into(), &"weather_agent".into()),
            "{rel}"
        );
    }
    server.stop().await;
}

/// Item 6: a GroupChatManager's `chat_messages` hold the whole conversation once per agent:
/// its 7 messages were read as 28, every weight four times over. A conversation that
/// repeats an earlier one counts once, and the graph is the group chat's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_group_chat_manager_copies_count_once() {
    let server = TestServer::start(Options::default()).await;
    let copies = load(&server, "autogen/ag2/groupchat_manager_chat_messages.json").await;
    assert_eq!(edges(&copies.graph), owned(AG2_GROUP_CHAT));
    assert_eq!(copies.units["total"], 7);
    assert_eq!(copies.graph["graph"]["metadata"]["message_count"], 7);
    for rel in [
        "autogen/ag2/groupchat_messages.json",
        "autogen/ag2/groupchat_result.json",
    ] {
        let other = load(&server, rel).await;
        assert_eq!(edges(&other.graph), owned(AG2_GROUP_CHAT), "{rel}");
        assert_eq!(other.units["total"], 7, "{rel}");
    }
    server.stop().await;
}

/// Item 7: a failed tool call (AgentChat's `is_error: true`, AG2's `Error: ...`) read as a
/// success, and two calls made in one request were one interaction. Each call (and each
/// result) is an interaction of its own; a failed result's says `is_error: true`, and the
/// call's unit says how each call went, as a Claude Code turn's `tool_summary` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_tool_errors_fail_and_parallel_calls_are_two_interactions() {
    let server = TestServer::start(Options::default()).await;
    let s = load(&server, "autogen/agentchat/tool_error_parallel.json").await;
    assert_eq!(edges(&s.graph), owned(TOOL_ERROR_PARALLEL));
    let calls: Vec<&str> = interactions(&s.graph, "assistant", "tools")
        .iter()
        .map(|i| i["metadata"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        calls,
        [
            r#"get_weather({"city": "Paris"})"#,
            r#"get_population({"city": "Paris"})"#
        ]
    );
    let results: Vec<(&str, bool)> = interactions(&s.graph, "tools", "assistant")
        .iter()
        .map(|i| {
            (
                i["metadata"]["content"].as_str().unwrap(),
                i["metadata"]["is_error"] == true,
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("The weather in Paris is 23 degrees and sunny.", false),
            ("no population data for Paris", true)
        ]
    );
    let summary = &unit(&s.units, 1)["tool_summary"]["tool_calls"];
    assert_eq!(
        summary,
        &serde_json::json!([
            {"tool_use_id": "call_9", "tool_name": "get_weather", "success": true, "is_error": false, "result_count": 1},
            {"tool_use_id": "call_10", "tool_name": "get_population", "success": false, "is_error": true, "result_count": 1}
        ])
    );
    assert_eq!(unit(&s.units, 2)["is_error"], true);
    // AG2: the user_proxy's results, the second `Error: ...`.
    let ag2 = load(&server, "autogen/ag2/tools_chat_result.json").await;
    let results: Vec<bool> = interactions(&ag2.graph, "user_proxy", "weather_agent")
        .iter()
        .map(|i| i["metadata"]["is_error"] == true)
        .collect();
    assert_eq!(results, [false, false, true], "the task, then the two results");
    let summary = &unit(&ag2.units, 1)["tool_summary"]["tool_calls"];
    assert_eq!(summary[0]["success"], true);
    assert_eq!(summary[1]["is_error"], true);
    server.stop().await;
}

/// Item 8: a UserProxyAgent's replies (each after a `UserInputRequestedEvent`) are what the
/// human typed, and were typed assistant turns of an agent. They are the human's turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autogen_user_proxy_replies_are_the_humans_turns() {
    let server = TestServer::start(Options::default()).await;
    let s = load(&server, "autogen/agentchat/round_robin_user_proxy.json").await;
    assert_eq!(edges(&s.graph), owned(ROUND_ROBIN_USER_PROXY));
    let kinds: Vec<(&str, &str, &str)> = s.units["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["actor_id"].as_str().unwrap(),
                u["actor_type"].as_str().unwrap(),
                u["unit_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("user", "human", "user_turn"),
            ("assistant", "agent", "assistant_turn"),
            ("user_proxy", "human", "user_turn"),
            ("assistant", "agent", "assistant_turn"),
            ("user_proxy", "human", "user_turn"),
        ]
    );
    assert_eq!(s.units["user_turn_count"], 3);
    server.stop().await;
}
