//! Serves a guard's task snapshots on a control socket and reads them back
//! over the wire protocol, as `stallwarden list` and `describe` do (R6.5,
//! R4.2): one JSON request line per connection, one JSON line back.
//!
//! `cargo run --example control_socket`

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::Value;
use stallwarden::control::{ControlServer, Request};
use stallwarden::{Guard, Profile};

/// Sends one request on a fresh connection and returns the response line.
fn ask(socket: &Path, request: &Request) -> Result<Value, Box<dyn std::error::Error>> {
    let mut stream = UnixStream::connect(socket)?;
    writeln!(stream, "{}", serde_json::to_string(request)?)?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    Ok(serde_json::from_str(&reply)?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let guard = Guard::default();
    let turn = guard.start("agent-turn", Profile::default())?;
    turn.tool_started("call-1", "bash")?;
    turn.set_step("tool \"bash\" still running");
    let _build = guard.start("build", Profile::default())?;

    let path =
        std::env::temp_dir().join(format!("stallwarden-example-{}.sock", std::process::id()));
    let server = ControlServer::bind(&path, guard.clone())?;
    println!("listening on {}", server.path().display());

    let listed = ask(server.path(), &Request::List {})?;
    for task in listed["tasks"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {}",
            task["name"].as_str().unwrap_or("?"),
            task["state"]
        );
    }
    let turn_status = ask(
        server.path(),
        &Request::Describe {
            task: "agent-turn".into(),
        },
    )?;
    println!("{}", serde_json::to_string_pretty(&turn_status["task"])?);

    let missing = ask(
        server.path(),
        &Request::Describe {
            task: "no-such-task".into(),
        },
    )?;
    println!("as expected: {}", missing["error"]);
    Ok(()) // dropping the server removes the socket file
}
