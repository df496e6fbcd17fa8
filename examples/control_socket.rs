//! Serves a guard's task snapshots on a control socket and reads them back
//! with the client functions, as `stallguard status` would (R6.5, R4.2).
//!
//! `cargo run --example control_socket`

use stallguard_sinks::control::{client, ControlServer};
use watchdog_core::{Guard, Profile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let guard = Guard::default();
    let turn = guard.start("agent-turn", Profile::default())?;
    turn.tool_started("call-1", "bash")?;
    turn.set_step("tool \"bash\" still running");
    let _build = guard.start("build", Profile::default())?;

    let path = std::env::temp_dir().join(format!("stallguard-example-{}.sock", std::process::id()));
    let server = ControlServer::bind(&path, guard.clone())?;
    println!("listening on {}", server.path().display());

    for task in client::list(server.path())? {
        println!(
            "{:<12} {}",
            task["name"].as_str().unwrap_or("?"),
            task["state"]
        );
    }
    let turn_status = client::describe(server.path(), "agent-turn")?;
    println!("{}", serde_json::to_string_pretty(&turn_status)?);

    match client::describe(server.path(), "no-such-task") {
        Err(e) => println!("as expected: {e}"),
        Ok(_) => println!("unexpected: found a task that does not exist"),
    }
    Ok(()) // dropping the server removes the socket file
}
