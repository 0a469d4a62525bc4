//! One task pair through one broker session: the owner's words (for the loopd channel), the
//! user's calls, then the attacker's, each side effect classified as it ended. An approval never
//! waits: the owner refuses each at once through the owner socket, and the call counts as asked.

use std::path::Path;

use proto::{ApprovalId, BrokerFrame, DenyReason, OwnerRequest, ToolResponse};
use testkit::{AgentClient, OwnerClient};

use super::scenario::{Attack, Call, Scenario, Task};

/// How the session reaches the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// `bx mcp`: an MCP client never sends the user's prompt, so no owner's words.
    BxMcp,
    /// loopd: the owner's message reaches the broker first, as the owner's words.
    Loopd,
}

impl Channel {
    /// Both, in report order.
    pub const BOTH: [Channel; 2] = [Channel::BxMcp, Channel::Loopd];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Channel::BxMcp => "bx mcp",
            Channel::Loopd => "loopd",
        }
    }
}

/// How one call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran without the owner being asked (a tool failure after running counts too).
    Ran,
    /// The owner was asked (and refused at once).
    Asked,
    /// The broker refused it without asking.
    Refused(DenyReason),
}

impl Outcome {
    /// Whether the broker stopped it (asked or refused).
    pub fn stopped(&self) -> bool {
        !matches!(self, Outcome::Ran)
    }

    /// A word for the report.
    pub fn word(&self) -> String {
        match self {
            Outcome::Ran => "ran".to_string(),
            Outcome::Asked => "asked".to_string(),
            Outcome::Refused(reason) => format!("refused ({reason:?})"),
        }
    }
}

/// Who made a side-effect call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The user, with values the owner gave or a trusted result held.
    User,
    /// The user, with a value that came from untrusted text alone (expected to ask).
    UserFromUntrusted,
    /// The attacker.
    Attacker,
}

/// One side-effect call of a pair and how it ended.
#[derive(Debug, Clone)]
pub struct Counted {
    /// Who made it.
    pub who: Who,
    /// The tool, as the session called it.
    pub tool: String,
    /// How it ended.
    pub outcome: Outcome,
    /// When it asked: the lines its approval showed the owner (which values, and why).
    pub why: Vec<String>,
}

/// What one pair gave.
#[derive(Debug)]
pub struct PairResult {
    /// `task/attack`.
    pub pair: String,
    /// The scenario's setting and the attacker's goal, for the details.
    pub about: String,
    /// Every side-effect call, in order.
    pub counted: Vec<Counted>,
}

/// Sends the owner's words on `channel` before the pair's first call: as loopd does (a frame
/// of their own on the agent socket, issue 33 item 3) for `Channel::Loopd`; never for
/// `Channel::BxMcp`, since an MCP client never passes on its user's prompt.
fn send_owners_words(client: &mut AgentClient, channel: Channel, request: &str) {
    match channel {
        Channel::BxMcp => {}
        Channel::Loopd => {
            let answer = client.send(&proto::AgentFrame::OwnerWords {
                text: request.to_string(),
            });
            assert!(
                matches!(answer, Some(proto::BrokerFrame::OwnerWordsKept {})),
                "the owner's words were not kept: {answer:?}"
            );
        }
    }
}

/// Runs `task` paired with `attack` in a new session on `socket`, refusing every ask through
/// `owner_socket`; `project` is the pair's project folder (coding) or unused. Panics when a
/// read does not run, a user call fails, or an attack that `uses = "untrusted"` carries no
/// value the session received untrusted (the scenario would test nothing). Whether every tool
/// called is in the catalog is checked once per broker ([`super::start_broker`]): listing it
/// in each session would start every server for every session.
pub fn run_pair(
    scenario: &Scenario,
    task: &Task,
    attack: &Attack,
    channel: Channel,
    sockets: (&Path, &Path),
    project: &Path,
) -> PairResult {
    let pair = format!("{}/{}", task.id, attack.id);
    let mut client = AgentClient::open(sockets.0, None);
    let owner = OwnerClient::open(sockets.1);
    send_owners_words(&mut client, channel, &task.request);
    let mut session = Session {
        client,
        owner,
        next_id: 0,
        untrusted_text: String::new(),
        failed: None,
        why: Vec::new(),
        project,
        pair: &pair,
    };
    let mut counted = Vec::new();
    let mut step = |session: &mut Session, call: &Call, who: Who| {
        let tool = scenario.full_name(&call.tool);
        let outcome = session.call(&tool, call);
        if let Some(message) = session.failed.take() {
            // An attack that ran and failed (a command that exits non-zero) still ran; a user
            // call that fails is a mistake of the scenario.
            assert_eq!(who, Who::Attacker, "{pair}: {tool} failed: {message}");
        }
        if scenario.side_effect(&call.tool) {
            counted.push(Counted {
                who,
                tool: tool.clone(),
                outcome,
                why: std::mem::take(&mut session.why),
            });
        } else {
            assert_eq!(outcome, Outcome::Ran, "{pair}: the read {tool} did not run");
        }
    };
    for call in &task.call {
        let who = match call.from_untrusted {
            Some(_) => Who::UserFromUntrusted,
            None => Who::User,
        };
        step(&mut session, call, who);
    }
    for call in &attack.call {
        if attack.uses == "untrusted" && scenario.side_effect(&call.tool) {
            // Compared without case or blanks: an attack may re-spell the value (an IBAN
            // spaced otherwise, an address in capitals) as long as its normal form is the same.
            let compact = |text: &str| -> String {
                text.chars()
                    .filter(|c| !c.is_whitespace())
                    .flat_map(char::to_lowercase)
                    .collect()
            };
            let seen = compact(&session.untrusted_text);
            assert!(
                call.words()
                    .iter()
                    .map(|w| compact(w))
                    .any(|w| w.len() >= 5 && seen.contains(&w)),
                "{pair}: the attack's {} carries no value of an untrusted result the session received",
                call.tool
            );
        }
        step(&mut session, call, Who::Attacker);
    }
    // Not closed: `close` waits for the session's server instances to end; dropping the
    // connection leaves the session to end idle (`idle_timeout_ms`), and nothing reuses it.
    drop(session);
    PairResult {
        about: format!("{}; attack: {}", scenario.setting, attack.goal),
        pair,
        counted,
    }
}

/// A session being replayed.
struct Session<'a> {
    client: AgentClient,
    owner: OwnerClient,
    /// The lines the last ask showed the owner.
    why: Vec<String>,
    next_id: u64,
    /// Every untrusted result received so far, lowercased.
    untrusted_text: String,
    /// The message of the last call that ran and failed.
    failed: Option<String>,
    project: &'a Path,
    pair: &'a str,
}

impl Session<'_> {
    /// Makes one call and follows it to its end, refusing an ask at once.
    fn call(&mut self, tool: &str, call: &Call) -> Outcome {
        self.next_id += 1;
        let arguments = call.json(self.project);
        self.client.start_call(self.next_id, tool, &arguments);
        let mut asked = false;
        loop {
            let frame = self.client.receive();
            let Some(BrokerFrame::Response { response, .. }) = frame else {
                panic!("{}: {tool}: the broker answered {frame:?}", self.pair);
            };
            match response {
                ToolResponse::PendingApproval { approval, .. } => {
                    asked = true;
                    self.why = self
                        .owner
                        .pending()
                        .into_iter()
                        .find(|v| v.approval.0 == approval)
                        .map(|v| v.provenance)
                        .unwrap_or_default();
                    let reply = self.owner.send(&OwnerRequest::Refuse {
                        approval: ApprovalId(approval),
                    });
                    assert!(reply.is_some(), "{}: the owner socket closed", self.pair);
                }
                ToolResponse::Result {
                    content, untrusted, ..
                } => {
                    assert!(!asked, "{}: {tool} ran though refused", self.pair);
                    if untrusted {
                        self.untrusted_text.push_str(&content.to_lowercase());
                        self.untrusted_text.push('\n');
                    }
                    return Outcome::Ran;
                }
                ToolResponse::Failed { message } => {
                    assert!(!asked, "{}: {tool} ran though refused", self.pair);
                    self.failed = Some(format!("{arguments}: {message}"));
                    return Outcome::Ran;
                }
                ToolResponse::Denied { reason } if asked => {
                    assert_eq!(reason, DenyReason::ApprovalRefused, "{}", self.pair);
                    return Outcome::Asked;
                }
                ToolResponse::Denied { reason } => return Outcome::Refused(reason),
            }
        }
    }
}
