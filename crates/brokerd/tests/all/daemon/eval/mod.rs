//! boxmaker's own evaluation of integrity (issue 33, item 7; docs/EVALUATION.md): the
//! scenarios of `eval/scenarios/` replayed through a real broker under each grant set of
//! `eval/grants/`, on both channels, every side effect classified as ran unasked, asked or
//! refused. What must always hold is asserted (every injection side effect stopped, every
//! user value taken from untrusted text asked); how many user side effects ran unasked is
//! printed, not asserted (`-- --nocapture`).
//!
//! One broker per grant set, serving every session of it: each task pair is a session of its
//! own, closed at its end, and every downstream server runs one instance per session (not
//! `shared`: a shared instance would carry one session's untrusted input into another's
//! results), so the sessions are independent and run a few at a time.

mod replay;
mod report;
mod scenario;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use testkit::BrokerProcess;

use replay::{Channel, PairResult};
use scenario::Scenario;

/// The grant sets the evaluation runs, each a folder of `eval/grants/`: a set that fails to
/// load fails the run.
const GRANT_SETS: &[&str] = &["taint", "provenance"];

/// How many sessions run at once.
const WORKERS: usize = 3;

#[test]
fn every_scenario_file_parses_and_pairs_each_of_its_tasks_with_two_attacks_or_more() {
    let scenarios = scenario::load_all();
    let settings: Vec<&str> = scenarios.iter().map(|s| s.setting.as_str()).collect();
    assert_eq!(settings.len(), 4, "{settings:?}");
    let tasks: usize = scenarios.iter().map(|s| s.task.len()).sum();
    assert!(tasks >= 12, "{tasks} user tasks");
    let from_untrusted = scenarios
        .iter()
        .flat_map(|s| &s.task)
        .flat_map(|t| &t.call)
        .filter(|c| c.from_untrusted.is_some())
        .count();
    assert!(
        from_untrusted >= 3,
        "{from_untrusted} user values from untrusted text"
    );
}

#[test]
fn the_evaluation_stops_every_injection_side_effect_under_every_grant_set() {
    let scenarios = scenario::load_all();
    let started = Instant::now();
    let mut tables = Vec::new();
    for set in GRANT_SETS {
        let set_started = Instant::now();
        let broker = start_broker(set, &scenarios);
        for channel in Channel::BOTH {
            let results = run_all(&broker, &scenarios, channel);
            tables.push(report::Table::of(set, channel, &results));
            report::print_details(set, channel, &results);
        }
        eprintln!(
            "grant set {set}: {:.1} s",
            set_started.elapsed().as_secs_f64()
        );
    }
    eprintln!("{}", report::markdown(&tables));
    eprintln!(
        "the evaluation took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for table in &tables {
        table.assert_safe();
    }
}

/// A broker serving `set`'s grant files and a scenario server per downstream scenario, with
/// every downstream tool pinned as the owner pins them (`bx grants pin`), and `bx grants check`
/// passing.
fn start_broker(set: &str, scenarios: &[Scenario]) -> BrokerProcess {
    let folder = scenario::eval_dir().join("grants").join(set);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("grant set {set}: {}: {e}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    let broker = BrokerProcess::start_with_grant_files(&files, &config(scenarios));
    let servers: Vec<String> = scenarios
        .iter()
        .filter_map(|s| s.server.as_ref())
        .map(|server| format!("{server}.*"))
        .collect();
    let mut args = vec!["grants", "pin"];
    args.extend(servers.iter().map(String::as_str));
    let (code, out, err) = super::gateway::bx(&broker, &args);
    assert_eq!(
        code,
        0,
        "grant set {set}: bx grants pin failed:\n{out}\n{err}\n{}",
        broker.log()
    );
    // Every tool a scenario calls is pinned once the broker has reloaded the pinned files.
    let wanted: Vec<String> = scenarios
        .iter()
        .flat_map(|s| {
            s.task
                .iter()
                .flat_map(|t| t.call.iter().chain(t.attack.iter().flat_map(|a| &a.call)))
                .map(|c| s.full_name(&c.tool))
        })
        .collect();
    let listed = super::eventually(|| {
        let mut client = testkit::AgentClient::open(&broker.socket(), None);
        let tools = match client.send(&proto::AgentFrame::ListTools {}) {
            Some(proto::BrokerFrame::Tools { tools }) => tools,
            _ => return false,
        };
        let _ = client.send(&proto::AgentFrame::Close {});
        wanted.iter().all(|w| tools.iter().any(|t| &t.name == w))
    });
    assert!(
        listed,
        "grant set {set}: a tool the scenarios call is not in the catalog after pinning:\n{}",
        broker.log()
    );
    let (code, check, _) = super::gateway::bx(&broker, &["grants", "check"]);
    assert_eq!(code, 0, "grant set {set}: bx grants check:\n{check}");
    broker
}

/// `brokerd.toml`: short limits, and one `[[mcp.servers]]` per downstream scenario, each
/// `eval/server.py` serving its scenario file.
fn config(scenarios: &[Scenario]) -> String {
    let venv = super::gateway::sdk_venv();
    let eval = scenario::eval_dir();
    let mut read_only = testkit::python::python_folders(&venv);
    read_only.push(eval.display().to_string());
    let mut config = super::FAST.to_string();
    for scenario in scenarios {
        let Some(server) = &scenario.server else {
            continue;
        };
        config.push_str(&format!(
            "\n[[mcp.servers]]\nname = {server:?}\ncommand = [{:?}, {:?}, {:?}]\nread_only = {read_only:?}\ncall_ms = 10000\nstart_ms = 30000\n",
            venv.join("bin/python").display().to_string(),
            eval.join("server.py").display().to_string(),
            eval.join("scenarios")
                .join(&scenario.name)
                .display()
                .to_string(),
        ));
    }
    config
}

/// Every task pair of every scenario on `channel`, `WORKERS` sessions at a time; the results
/// in scenario, task and attack order.
fn run_all(broker: &BrokerProcess, scenarios: &[Scenario], channel: Channel) -> Vec<PairResult> {
    let jobs: Vec<(usize, usize, usize)> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(s, scenario)| {
            scenario
                .task
                .iter()
                .enumerate()
                .flat_map(move |(t, task)| (0..task.attack.len()).map(move |a| (s, t, a)))
        })
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<PairResult>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    let (socket, owner_socket) = (broker.socket(), broker.owner_socket());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&(s, t, a)) = jobs.get(index) else {
                        break;
                    };
                    let scenario = &scenarios[s];
                    let task = &scenario.task[t];
                    let attack = &task.attack[a];
                    let pair = format!("{}-{t}-{a}", scenario.name.trim_end_matches(".toml"));
                    let project = project(broker, scenario, channel, &pair);
                    let result = replay::run_pair(
                        scenario,
                        task,
                        attack,
                        channel,
                        (&socket, &owner_socket),
                        &project,
                    );
                    results.lock().unwrap()[index] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect()
}

/// A fresh copy of the coding scenario's project for one pair, in the broker's work folder
/// (the workspace its grants name); for a downstream scenario, the work folder itself.
fn project(broker: &BrokerProcess, scenario: &Scenario, channel: Channel, pair: &str) -> PathBuf {
    if !scenario.builtin {
        return broker.work.clone();
    }
    let channel = match channel {
        Channel::BxMcp => "mcp",
        Channel::Loopd => "loopd",
    };
    let dir = broker.work.join(format!("{channel}-{pair}"));
    for file in &scenario.file {
        let path = dir.join(&file.path);
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("/"))).unwrap();
        std::fs::write(&path, &file.text).unwrap();
    }
    dir
}
