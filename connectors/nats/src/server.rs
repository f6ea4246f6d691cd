//! A local `nats-server` for tests, examples and the bench, through `scripts/nats-server.sh`.

use std::path::PathBuf;
use std::process::Command;

use crate::error::ConnectorError;

/// A `nats-server` on 127.0.0.1 with JetStream in a temporary directory, started by the
/// project's `scripts/nats-server.sh` (which installs the Debian package when the binary is
/// missing). Dropping it stops the server and removes the directory.
pub struct LocalServer {
    url: String,
    port: u16,
    dir: String,
    maps: Vec<(String, String)>,
    running: bool,
}

/// The script, found from this crate's source directory (or `NATS_SERVER_SCRIPT`).
fn script() -> PathBuf {
    std::env::var_os("NATS_SERVER_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/nats-server.sh")
        })
}

impl LocalServer {
    /// Starts a server on a free port with the subject mappings `maps` (source, destination).
    ///
    /// # Errors
    /// [`ConnectorError::Server`] when the script fails (no binary and no way to install it, or
    /// the server did not start), with its message.
    pub fn start(maps: &[(String, String)]) -> Result<Self, ConnectorError> {
        Self::launch(maps.to_vec(), None, None)
    }

    fn launch(
        maps: Vec<(String, String)>,
        port: Option<u16>,
        dir: Option<&str>,
    ) -> Result<Self, ConnectorError> {
        let mut cmd = Command::new("bash");
        cmd.arg(script()).arg("start");
        if let Some(port) = port {
            cmd.arg("--port").arg(port.to_string());
        }
        if let Some(dir) = dir {
            cmd.arg("--dir").arg(dir);
        }
        for (from, to) in &maps {
            cmd.arg("--map").arg(format!("{from}={to}"));
        }
        let out = cmd.output().map_err(|e| {
            ConnectorError::Server(format!("cannot run {}: {e}", script().display()))
        })?;
        if !out.status.success() {
            return Err(ConnectorError::Server(format!(
                "{} start failed: {}",
                script().display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).map(str::to_string))
                .ok_or_else(|| ConnectorError::Server(format!("the script printed no {name}")))
        };
        let url = field("NATS_URL=")?;
        let dir = field("NATS_DIR=")?;
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| ConnectorError::Server(format!("no port in {url}")))?;
        Ok(Self {
            url,
            port,
            dir,
            maps,
            running: true,
        })
    }

    /// The client URL, `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops the server but keeps its port and storage, so that [`restart`](Self::restart)
    /// brings the same streams back (a lost connection, seen from the clients).
    ///
    /// # Errors
    /// [`ConnectorError::Server`] when the script fails.
    pub fn stop(&mut self) -> Result<(), ConnectorError> {
        self.run_stop(true)
    }

    /// Kills the server with `SIGKILL` (a crash: nothing is flushed), keeping its port and
    /// storage so that [`restart`](Self::restart) brings back what its store had written.
    ///
    /// # Errors
    /// [`ConnectorError::Server`] when the server's process id cannot be read or the signal
    /// cannot be sent.
    ///
    /// # Example
    /// ```no_run
    /// let mut server = correlator_nats::LocalServer::start(&[])?;
    /// server.kill()?;
    /// std::thread::sleep(std::time::Duration::from_secs(1));
    /// server.restart()?;
    /// # Ok::<(), correlator_nats::ConnectorError>(())
    /// ```
    pub fn kill(&mut self) -> Result<(), ConnectorError> {
        let file = format!("{}/pid", self.dir);
        let pid = std::fs::read_to_string(&file)
            .map_err(|e| ConnectorError::Server(format!("cannot read {file}: {e}")))?;
        let pid = pid.trim().to_string();
        let out = Command::new("kill")
            .arg("-KILL")
            .arg(&pid)
            .output()
            .map_err(|e| ConnectorError::Server(format!("cannot run kill: {e}")))?;
        if !out.status.success() {
            return Err(ConnectorError::Server(format!(
                "kill -KILL {pid}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // Gone once it has no process entry or is a zombie (nobody may reap it: the script's
        // shell exited); bounded at 10 s, as in the script.
        let stat = format!("/proc/{pid}/stat");
        for _ in 0..200 {
            match std::fs::read_to_string(&stat) {
                Ok(s) if !s.contains(") Z ") => {}
                _ => break,
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.running = false;
        Ok(())
    }

    /// Starts the stopped server again on the same port with the same storage.
    ///
    /// # Errors
    /// [`ConnectorError::Server`] when it does not start (the port may have been taken).
    pub fn restart(&mut self) -> Result<(), ConnectorError> {
        let mut again = Self::launch(self.maps.clone(), Some(self.port), Some(&self.dir))?;
        self.running = true;
        // `again` describes this same server: disarm its drop.
        again.running = false;
        again.dir.clear();
        Ok(())
    }

    fn run_stop(&mut self, keep: bool) -> Result<(), ConnectorError> {
        let mut cmd = Command::new("bash");
        cmd.arg(script()).arg("stop").arg(&self.dir);
        if keep {
            cmd.arg("--keep");
        }
        let out = cmd
            .output()
            .map_err(|e| ConnectorError::Server(format!("cannot run the script: {e}")))?;
        self.running = false;
        if out.status.success() {
            Ok(())
        } else {
            Err(ConnectorError::Server(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ))
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if self.running || std::path::Path::new(&self.dir).exists() {
            let _ = self.run_stop(false);
        }
    }
}
