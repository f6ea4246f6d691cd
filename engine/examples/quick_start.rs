// A card-fraud service on tokio: one monitor instance per card across a pool of contexts, on event
// time, alerts read from a bounded typed output. The crate's rustdoc and the README show this file.
// Run: cargo run -p correlator --features async --example quick_start
use std::time::Duration;

use correlator::{
    ContextOptions, Correlator, Event, Monitor, Output, OutputOptions, Pattern, Scope, Time,
};

#[derive(Clone, Debug)]
struct Tx {
    card: u64,
    amount: u32,
    at_ms: u64,
}

impl Event for Tx {
    type Kind = ();
    fn kind(&self) {}
    // A pool routes by key and keeps one instance per key; event time reads time().
    fn key(&self) -> Option<u64> {
        Some(self.card)
    }
    fn time(&self) -> Option<Time> {
        Some(Time::from_millis(self.at_ms))
    }
}

/// One card: three transactions over 1,000 within 60 s of the first of them raise an alert.
struct Card {
    card: u64,
    alerts: Output<u64>,
}

impl Monitor<Tx> for Card {
    fn on_load(&mut self, cx: &mut Scope<'_, Tx, Self>) {
        let card = self.card;
        let large = || Pattern::<Tx>::any().key(card).filter(|t| t.amount > 1_000);
        let three = large().then(large()).then(large());
        cx.when_all(
            three.within_from_first(Duration::from_secs(60)),
            |m, cx, _| {
                if !cx.emit_to(&m.alerts, m.card) {
                    eprintln!("card {}: nobody reads the alerts any more", m.card);
                }
            },
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Correlator::<Tx>::builder().event_time().build()?;
    let (alerts, mut rx) = engine.typed_output::<u64>(OutputOptions::bounded(1_024))?;
    let pool = engine.create_pool(ContextOptions::new("cards"), 2)?;
    // A card's first transaction creates its instance and reaches its listeners too.
    pool.load_per_key_delivering([()], move |card, _first: &Tx| Card {
        card,
        alerts: alerts.clone(),
    })?;
    engine.start();
    let reader = tokio::spawn(async move {
        let mut flagged = Vec::new();
        while let Ok(card) = rx.recv_async().await {
            flagged.push(card); // ends once the engine has shut down and the output is empty
        }
        flagged
    });
    let mut input = pool.input();
    for (i, card) in [7, 7, 8, 7, 8].into_iter().enumerate() {
        input
            .send_async(Tx {
                card,
                amount: 5_000,
                at_ms: i as u64 * 1_000,
            })
            .await?;
    }
    engine.shutdown_async().await?; // processes everything accepted, then stops
    assert_eq!(reader.await?, [7]);
    Ok(())
}
