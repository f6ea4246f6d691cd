//! Shared helpers of the behaviour tests: a small event type, a log, and a monitor whose load hook
//! is a closure, so that each test states its listeners where it asserts on them.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use correlator::{Correlator, DieReason, Event, Monitor, Scope};

/// A test event: a kind, a value, and a free-form tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ev {
    pub kind: u32,
    pub val: u64,
    pub tag: &'static str,
}

impl Event for Ev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

pub fn ev(kind: u32, val: u64) -> Ev {
    Ev { kind, val, tag: "" }
}

pub fn tagged(kind: u32, tag: &'static str) -> Ev {
    Ev { kind, val: 0, tag }
}

/// A thread-safe list of what happened, in order.
#[derive(Clone, Default, Debug)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Takes the lines, leaving out the `"<name> die <reason>"` lines of `Script::on_die`.
    pub fn take_work(&self) -> Vec<String> {
        self.take()
            .into_iter()
            .filter(|l| !l.contains(" die "))
            .collect()
    }

    pub fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self, s: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|x| *x == s).count()
    }
}

pub type Cx<'a> = Scope<'a, Ev, Script>;
type LoadFn = Box<dyn FnOnce(&mut Script, &mut Cx<'_>) + Send>;

/// A monitor whose load hook is a closure; `on_die` logs `"<name> die <reason>"`.
pub struct Script {
    pub name: &'static str,
    pub log: Log,
    pub count: u64,
    load: Option<LoadFn>,
}

impl Script {
    pub fn new(
        name: &'static str,
        log: &Log,
        load: impl FnOnce(&mut Script, &mut Cx<'_>) + Send + 'static,
    ) -> Self {
        Self {
            name,
            log: log.clone(),
            count: 0,
            load: Some(Box::new(load)),
        }
    }
}

impl Clone for Script {
    /// A spawned copy: the same state, no load hook (listeners are not copied, R6.2).
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            log: self.log.clone(),
            count: self.count,
            load: None,
        }
    }
}

impl Monitor<Ev> for Script {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        if let Some(f) = self.load.take() {
            f(self, cx);
        }
    }

    fn on_die(&mut self, reason: &DieReason, _cx: &mut Cx<'_>) {
        let r = match reason {
            DieReason::Died => "died".to_string(),
            DieReason::NoListeners => "no-listeners".to_string(),
            DieReason::Panicked(m) => format!("panicked({m})"),
            DieReason::Shutdown => "shutdown".to_string(),
            other => format!("{other:?}"),
        };
        self.log.push(format!("{} die {r}", self.name));
    }
}

/// A correlator with a small capacity and externally driven time (so that no clock tick enters
/// an inbox unless the test sends it), for tests.
pub fn correlator(capacity: usize) -> Correlator<Ev> {
    Correlator::builder()
        .inbox_capacity(capacity)
        .external_time()
        .build()
        .expect("valid test configuration")
}

/// Waits up to 10 s for `cond`; returns whether it became true.
pub fn eventually(cond: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// Everything `tracing` logs, from every thread: install it as the global subscriber (once per test
/// binary), then read it with [`text`](Self::text).
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub fn install_global() -> Self {
        let out = Captured::default();
        tracing::subscriber::set_global_default(out.subscriber())
            .expect("one subscriber per test binary");
        out
    }

    /// What `tracing` logs on this thread while `f` runs, with `f`'s value (a scoped subscriber:
    /// any number per test binary).
    pub fn during<T>(f: impl FnOnce() -> T) -> (T, String) {
        let out = Captured::default();
        let value = tracing::subscriber::with_default(out.subscriber(), f);
        (value, out.text())
    }

    /// A subscriber that writes into this capture, without colour codes.
    fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` in a thread and returns its result, failing the test after 60 s instead of hanging.
pub fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the scenario finished within 60 s")
}

/// A seeded stream of pseudo-random numbers (a 64-bit LCG, its upper 31 bits): the generated
/// inputs of a test are the same in every run.
pub fn seeded(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s >> 33
    }
}

/// An empty path in the temporary directory for the test `name` of this process.
pub fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("correlator-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The checkpoint files (`*.ckpt`) in `dir`, sorted; none if it does not exist.
pub fn checkpoint_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ckpt"))
        .collect();
    files.sort();
    files
}
