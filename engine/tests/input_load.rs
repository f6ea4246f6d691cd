//! `InputHandle::load_in`: a monitor loaded through an input handle is an inbox entry of that
//! handle (R2.3, R2.4), so its `on_load` runs only after everything the handle sent before it, and
//! everything those events routed (R2.2), has been processed. Connectors use it as a receipt.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use correlator::{Correlator, Error, Event, Monitor, Pattern, Scope};

#[derive(Clone, Debug)]
struct Ev {
    seq: u32,
    routed: bool,
}

impl Event for Ev {
    type Kind = ();
    fn kind(&self) {}
}

/// Records every event it sees; each external event routes one child (R3.1).
struct Recorder {
    seen: Arc<Mutex<Vec<(u32, bool)>>>,
}

impl Monitor<Ev> for Recorder {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |m: &mut Recorder, cx: &mut Scope<'_, Ev, Recorder>, e: &Ev| {
                m.seen.lock().unwrap().push((e.seq, e.routed));
                if !e.routed {
                    cx.route(Ev {
                        seq: e.seq,
                        routed: true,
                    });
                }
            },
        );
    }
}

/// Reports how many events the recorder had seen when its `on_load` ran, then ends.
struct Receipt {
    seen: Arc<Mutex<Vec<(u32, bool)>>>,
    done: mpsc::Sender<usize>,
}

impl Monitor<Ev> for Receipt {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let _ = self.done.send(self.seen.lock().unwrap().len());
        cx.die();
    }
}

// R2.4 (with R2.2, R2.3): a load through an input handle runs after every earlier send of that
// handle and everything they routed, and before its later sends, while the context is running and
// the inbox is nearly full (so the sends and the load wait for room).
#[test]
fn r2_4_input_load_in_runs_after_earlier_sends_of_the_handle() {
    let (result_tx, result_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let c = Correlator::<Ev>::builder()
            .inbox_capacity(8)
            .build()
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        c.load(Recorder { seen: seen.clone() }).unwrap();
        c.start();
        let input = c.input();
        let (done_tx, done_rx) = mpsc::channel();
        let mut receipts = Vec::new();
        for batch in 0..20u32 {
            for i in 0..50 {
                let seq = batch * 50 + i;
                input.send_to(c.main(), Ev { seq, routed: false }).unwrap();
            }
            input
                .load_in(
                    c.main(),
                    Receipt {
                        seen: seen.clone(),
                        done: done_tx.clone(),
                    },
                )
                .unwrap();
            receipts.push(done_rx.recv_timeout(Duration::from_secs(30)).unwrap());
        }
        c.shutdown().unwrap();
        let _ = result_tx.send(receipts);
    });
    let receipts = result_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the scenario did not finish within 60 s");
    // Each receipt saw exactly the events of its batch and the ones before, each with its route.
    let expected: Vec<usize> = (1..=20).map(|b| b * 50 * 2).collect();
    assert_eq!(receipts, expected);
}

// R8.2: a load through a handle after shutdown is a typed error, not a panic.
#[test]
fn r8_2_input_load_in_after_shutdown_is_an_error() {
    let c = Correlator::<Ev>::builder().build().unwrap();
    let input = c.input();
    c.start();
    c.shutdown().unwrap();
    let (done, _rx) = mpsc::channel();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let err = input.load_in(c.main(), Receipt { seen, done }).unwrap_err();
    assert!(
        matches!(err, Error::ShutDown | Error::ContextStopped(_)),
        "{err:?}"
    );
}
