//! [`BrokerConnect`]: the broker session of a `bx mcp` process, over the agent socket. A stored
//! session ([`crate::session`]) is resumed; with none stored a new one is opened and kept;
//! `--new-session` opens a new one and replaces what was kept. A stored session the broker
//! refuses to resume is an error naming `--new-session`, never a silent fresh start (which
//! would drop the session's labels).

use std::path::PathBuf;
use std::sync::Arc;

use toolport::{BrokerPort, PortError};

use crate::gate::{Connect, Connected};
use crate::session;

/// Opens the broker session of a `bx mcp` process.
#[derive(Debug, Clone)]
pub struct BrokerConnect {
    /// The broker's agent socket.
    pub socket: PathBuf,
    /// The state folder, which keeps the session's resume token.
    pub state_dir: PathBuf,
    /// The session's name (`--session`); `None`: after the client and the workspace.
    pub name: Option<String>,
    /// Open a new session even when one is kept (`--new-session`).
    pub new_session: bool,
    /// The workspace the server was started in (its working folder).
    pub workspace: PathBuf,
}

impl Connect for BrokerConnect {
    fn connect(&self, client: &str) -> Result<Connected, String> {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| session::default_name(client, &self.workspace));
        let path = session::path_for(&self.state_dir, &name);
        let stored = if self.new_session {
            None
        } else {
            session::load(&path)?
        };
        let resumed = stored.is_some();
        let port = BrokerPort::connect_for(&self.socket, stored, Some(client.to_string()))
            .map_err(|e| match e {
                // `bx mcp` names the broker's folder with bx's flag, not loopd's --socket; a
                // new session would not help.
                PortError::NoBroker { socket } => {
                    proto::rendezvous::no_broker(std::path::Path::new(&socket), "--runtime-dir DIR")
                }
                other if resumed => format!(
                    "{other}; pass --new-session to start a new session (its labels start clean)"
                ),
                other => other.to_string(),
            })?;
        let id = port.session().session.0.clone();
        if !resumed {
            session::store(&path, port.session())?;
            tracing::info!(session = %id, name = %name, "opened a new broker session");
        }
        Ok(Connected {
            port: Arc::new(port),
            session: id,
        })
    }
}

#[cfg(test)]
mod tests {
    /// `bx mcp` never has the user's prompt, so it never sends the owner's words: the only
    /// way to send them is `toolport::BrokerPort::owner_words`, compiled only with the
    /// `owner-words` feature, which loopd turns on and this crate's manifest does not (the
    /// next test), and no file of this crate names the frame either (a raw frame would need a
    /// socket this crate never opens).
    #[test]
    fn bx_mcp_has_no_way_to_send_the_owners_words() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for entry in std::fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap();
            for name in ["OwnerWords", "owner_words", "UnixStream"] {
                assert!(!text.contains(name), "{} names {name}", path.display());
            }
        }
    }

    /// The `owner-words` feature of `toolport` reaches a build of this crate only through a
    /// manifest that asks for it: this one does not, nor does it depend on loopd (which does).
    #[test]
    fn the_manifest_asks_for_no_owner_words_and_depends_on_no_loopd() {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let text = std::fs::read_to_string(manifest).unwrap();
        assert!(!text.contains("owner-words"));
        assert!(text.contains("toolport.workspace = true"));
        for line in text.lines() {
            assert!(!line.trim_start().starts_with("loopd"), "{line}");
        }
    }
}
