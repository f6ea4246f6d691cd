//! SPEC §11: checkpoint storage in a local directory. Checkpoints round-trip byte for byte
//! (R11.2), sequences only increase (R11.1), every damaged file is detected (R11.3) and passed
//! over for the previous one with the reason reported, or, when none is intact, refused with an
//! error that lists them (R11.4), a crash's temporary file is ignored and then removed (R11.5),
//! the newest `keep` are kept (R11.6), and every failure is a typed error naming its path (R11.7).

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

mod common;

use common::Captured;
use correlator::checkpoint::{
    CheckpointError, CheckpointStore, DirStore, Loaded, SkipReason, StoredCheckpoint, DEFAULT_KEEP,
    HEADER_LEN, LOCK_FILE, MIN_KEEP,
};

/// A fresh directory of its own per test (under the system's temporary directory), removed when
/// the test ends, passed or failed.
struct TestDir(PathBuf);

impl TestDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "correlator-checkpoint-{}-{test}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// The names of every file in the directory, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name != LOCK_FILE)
            .collect();
        names.sort();
        names
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn seqs(list: &[StoredCheckpoint]) -> Vec<u64> {
    list.iter().map(|c| c.seq).collect()
}

fn loaded(store: &DirStore) -> Loaded {
    store
        .load_latest()
        .expect("a checkpoint loads")
        .expect("a checkpoint is stored")
}

/// Flips every bit of the byte at `at` of the file at `path`.
fn flip_byte(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at] ^= 0xFF;
    fs::write(path, bytes).unwrap();
}

/// Cuts the file at `path` to `len` bytes.
fn truncate(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

// R11.2: what is saved loads back byte for byte, under its sequence, from a file of the
// documented name; no temporary file is left behind.
#[test]
fn r11_2_a_saved_checkpoint_loads_back_byte_for_byte() {
    let dir = TestDir::new("round-trip");
    let mut store = DirStore::open(dir.path()).unwrap();
    let every_byte: Vec<u8> = (0..=255).collect();
    let large: Vec<u8> = (0..1_000_003u32).map(|i| (i * 31 % 251) as u8).collect();
    for (seq, payload) in [(1, &every_byte), (2, &large)] {
        store.save(seq, payload).unwrap();
        let l = loaded(&store);
        assert_eq!((l.seq, &l.payload), (seq, payload));
        assert!(l.skipped.is_empty());
    }
    assert_eq!(
        dir.names(),
        [
            "checkpoint-00000000000000000001.ckpt",
            "checkpoint-00000000000000000002.ckpt"
        ]
    );
    let list = store.list().unwrap();
    assert_eq!(seqs(&list), [1, 2]);
    assert_eq!(list[1].path, store.path_of(2));
    assert_eq!(list[1].len, (HEADER_LEN + large.len()) as u64);

    // A store opened again on the directory (once this one is gone) reads the same.
    drop(store);
    let again = DirStore::open(dir.path()).unwrap();
    assert_eq!(loaded(&again).payload, large);
}

// R11.2: an empty payload is a checkpoint like any other: stored, loaded as empty (not as
// "nothing stored").
#[test]
fn r11_2_an_empty_payload_is_a_checkpoint() {
    let dir = TestDir::new("empty-payload");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(0, b"").unwrap();
    let l = loaded(&store);
    assert_eq!((l.seq, l.payload.len()), (0, 0));
    assert_eq!(store.list().unwrap()[0].len, HEADER_LEN as u64);
}

// R11.4: a directory without checkpoints loads nothing, and that is not an error; opening
// creates the directory, parents included.
#[test]
fn r11_4_an_empty_directory_loads_nothing() {
    let dir = TestDir::new("empty-dir");
    let store = DirStore::open(dir.path().join("a").join("b")).unwrap();
    assert!(store.dir().is_dir());
    assert_eq!(store.load_latest().unwrap(), None);
    assert!(store.list().unwrap().is_empty());
}

// R11.3, R11.4: one flipped payload byte in the newest checkpoint fails its checksum; the
// previous checkpoint is loaded and the skipped file reported, in the value and as a warning.
#[test]
fn r11_4_a_flipped_payload_byte_falls_back_to_the_previous_checkpoint() {
    let dir = TestDir::new("flipped-byte");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(1, b"first state").unwrap();
    store.save(2, b"second state").unwrap();
    let newest = store.path_of(2);
    flip_byte(&newest, HEADER_LEN + 3);

    let (l, log) = Captured::during(|| loaded(&store));
    assert_eq!((l.seq, &l.payload[..]), (1, &b"first state"[..]));
    assert_eq!(l.skipped.len(), 1);
    assert_eq!((l.skipped[0].seq, &l.skipped[0].path), (2, &newest));
    assert!(
        matches!(l.skipped[0].reason, SkipReason::ChecksumMismatch { stored, computed } if stored != computed),
        "{:?}",
        l.skipped[0].reason
    );
    assert!(log.contains("WARN"), "{log}");
    assert!(
        log.contains("checkpoint-00000000000000000002.ckpt"),
        "{log}"
    );
    assert!(log.contains("checksum mismatch"), "{log}");
}

// R11.3, R11.4: a newest checkpoint cut short (inside its payload, and inside its header) is
// detected; loading falls back past both to the intact one and reports each, newest first.
#[test]
fn r11_4_a_truncated_checkpoint_falls_back_to_the_previous_checkpoint() {
    let dir = TestDir::new("truncated");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(1, b"one").unwrap();
    store.save(2, b"two").unwrap();
    store.save(3, b"three").unwrap();
    truncate(&store.path_of(3), HEADER_LEN as u64 + 2);
    truncate(&store.path_of(2), 10);

    let l = loaded(&store);
    assert_eq!((l.seq, &l.payload[..]), (1, &b"one"[..]));
    let reasons: Vec<(u64, SkipReason)> = l
        .skipped
        .iter()
        .map(|s| (s.seq, s.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                3,
                SkipReason::LengthMismatch {
                    declared: 5,
                    actual: 2
                }
            ),
            (2, SkipReason::TooShort { len: 10 }),
        ]
    );
    assert!(l.skipped[0].to_string().contains("cut short"));
}

// R11.4: when every stored checkpoint fails its checks, loading is an error that lists each
// (newest first, with its path and reason), not a silent fresh start.
#[test]
fn r11_4_every_checkpoint_corrupt_is_an_error_that_lists_them() {
    let dir = TestDir::new("all-corrupt");
    let mut store = DirStore::open(dir.path()).unwrap();
    for seq in 1..=3 {
        store.save(seq, b"state").unwrap();
    }
    flip_byte(&store.path_of(1), 0); // the magic
    flip_byte(&store.path_of(2), 8); // the version
    truncate(&store.path_of(3), 0);

    let e = store.load_latest().unwrap_err();
    let CheckpointError::AllCorrupt { skipped } = &e else {
        panic!("expected AllCorrupt, got {e:?}");
    };
    let got: Vec<(u64, &Path, &SkipReason)> = skipped
        .iter()
        .map(|s| (s.seq, s.path.as_path(), &s.reason))
        .collect();
    assert_eq!(
        got,
        [
            (
                3,
                store.path_of(3).as_path(),
                &SkipReason::TooShort { len: 0 }
            ),
            (
                2,
                store.path_of(2).as_path(),
                &SkipReason::UnsupportedVersion { version: 1 ^ 0xFF }
            ),
            (1, store.path_of(1).as_path(), &SkipReason::BadMagic),
        ]
    );
    let message = e.to_string();
    for seq in 1..=3 {
        assert!(
            message.contains(&format!("checkpoint-{seq:020}.ckpt")),
            "{message}"
        );
    }
    assert!(
        message.contains("restore an intact checkpoint"),
        "{message}"
    );
}

// R11.3: an intact checkpoint file under another checkpoint's name (copied or renamed by hand)
// is detected by its header's sequence, and passed over.
#[test]
fn r11_3_a_header_sequence_that_differs_from_the_file_name_is_detected() {
    let dir = TestDir::new("name-mismatch");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(1, b"one").unwrap();
    store.save(2, b"two").unwrap();
    fs::copy(store.path_of(1), store.path_of(5)).unwrap();

    let l = loaded(&store);
    assert_eq!((l.seq, &l.payload[..]), (2, &b"two"[..]));
    assert_eq!(l.skipped.len(), 1);
    assert_eq!(
        l.skipped[0].reason,
        SkipReason::SequenceMismatch {
            in_header: 1,
            in_name: 5
        }
    );
}

// R11.4: a checkpoint file that cannot be read at all (here a directory under its name) is
// passed over like a damaged one, with the operating system's reason.
#[test]
fn r11_4_an_unreadable_checkpoint_is_skipped_with_its_reason() {
    let dir = TestDir::new("unreadable");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(1, b"one").unwrap();
    fs::create_dir(store.path_of(2)).unwrap();

    let l = loaded(&store);
    assert_eq!(l.seq, 1);
    assert!(
        matches!(&l.skipped[0].reason, SkipReason::Unreadable { error } if !error.is_empty()),
        "{:?}",
        l.skipped
    );
}

// R11.5: a temporary file left by a crash mid-save is never loaded or listed, even when its
// bytes are a complete checkpoint, and the next save removes it (and any other); files that
// are not the store's are left alone.
#[test]
fn r11_5_a_leftover_temporary_file_is_ignored_then_removed() {
    let dir = TestDir::new("leftover-temp");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(1, b"one").unwrap();
    store.save(2, b"complete").unwrap();
    // A crash between writing checkpoint 2 and renaming it would leave exactly this file.
    let temp_2 = dir.path().join("checkpoint-00000000000000000002.ckpt.tmp");
    fs::rename(store.path_of(2), &temp_2).unwrap();
    let temp_9 = dir.path().join("checkpoint-00000000000000000009.ckpt.tmp");
    fs::write(&temp_9, b"half a hea").unwrap();
    let foreign = dir.path().join("notes.txt");
    fs::write(&foreign, b"not a checkpoint").unwrap();

    let l = loaded(&store);
    assert_eq!((l.seq, l.skipped.len()), (1, 0));
    assert_eq!(seqs(&store.list().unwrap()), [1]);

    store.save(2, b"written again").unwrap();
    assert!(!temp_2.exists() && !temp_9.exists());
    assert!(foreign.exists());
    assert_eq!(
        dir.names(),
        [
            "checkpoint-00000000000000000001.ckpt",
            "checkpoint-00000000000000000002.ckpt",
            "notes.txt"
        ]
    );
    assert_eq!(loaded(&store).payload, b"written again");
}

// R11.6: after every save exactly the newest `keep` checkpoints remain (fewer only while
// fewer were saved), for the default and other settings.
#[test]
fn r11_6_retention_keeps_exactly_the_newest_keep() {
    for keep in [MIN_KEEP, DEFAULT_KEEP, 5] {
        let dir = TestDir::new(&format!("retention-{keep}"));
        let mut store = if keep == DEFAULT_KEEP {
            DirStore::open(dir.path()).unwrap()
        } else {
            DirStore::builder(dir.path()).keep(keep).open().unwrap()
        };
        assert_eq!(store.keep(), keep);
        for seq in 1..=8u64 {
            store.save(seq * 10, &seq.to_le_bytes()).unwrap();
            let kept = seqs(&store.list().unwrap());
            let first = seq.saturating_sub(keep as u64 - 1).max(1);
            let expected: Vec<u64> = (first..=seq).map(|s| s * 10).collect();
            assert_eq!(kept, expected, "keep {keep}, after saving {}", seq * 10);
            assert_eq!(dir.names().len(), expected.len());
        }
    }
    assert_eq!(DEFAULT_KEEP, 3, "the documented default");
}

// R11.6: keeping fewer than two checkpoints is a configuration error that says what to set,
// and nothing is created.
#[test]
fn r11_6_keep_below_two_is_a_configuration_error() {
    let dir = TestDir::new("keep-too-small");
    for keep in [0, 1] {
        let e = DirStore::builder(dir.path()).keep(keep).open().unwrap_err();
        assert!(
            matches!(e, CheckpointError::InvalidKeep { keep: k } if k == keep),
            "{e:?}"
        );
        assert!(e.to_string().contains("set `keep` to 2 or more"), "{e}");
    }
    assert!(!dir.path().exists());
    assert_eq!(
        DirStore::builder(dir.path()).keep(2).open().unwrap().keep(),
        2
    );
}

// R11.1: a save under a sequence not above the newest stored is refused and writes nothing;
// the newest counts even when it is damaged, and across reopening the store.
#[test]
fn r11_1_a_sequence_not_above_the_newest_is_refused() {
    let dir = TestDir::new("not-increasing");
    let mut store = DirStore::open(dir.path()).unwrap();
    store.save(5, b"five").unwrap();
    for seq in [5, 4, 0] {
        let e = store.save(seq, b"older").unwrap_err();
        assert!(
            matches!(e, CheckpointError::NotIncreasing { seq: s, newest: 5 } if s == seq),
            "{e:?}"
        );
        assert!(e.to_string().contains("save under 6 or above"), "{e}");
    }
    assert_eq!(dir.names(), ["checkpoint-00000000000000000005.ckpt"]);
    assert_eq!(loaded(&store).payload, b"five");

    store.save(6, b"six").unwrap();
    flip_byte(&store.path_of(6), HEADER_LEN);
    drop(store);
    let mut reopened = DirStore::open(dir.path()).unwrap();
    assert!(matches!(
        reopened.save(6, b"six again"),
        Err(CheckpointError::NotIncreasing { seq: 6, newest: 6 })
    ));
    reopened.save(7, b"seven").unwrap();
    assert_eq!(loaded(&reopened).payload, b"seven");
}

// R11.7: file system failures are typed errors that carry the path; a file in the way of the
// directory and a directory removed under the store are reported, not panicked on.
#[test]
fn r11_7_io_errors_carry_the_path() {
    let dir = TestDir::new("io-errors");
    fs::create_dir_all(dir.path()).unwrap();
    let in_the_way = dir.path().join("a-file");
    fs::write(&in_the_way, b"").unwrap();
    let e = DirStore::open(&in_the_way).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::Io { path, .. } if path == &in_the_way),
        "{e:?}"
    );
    assert!(std::error::Error::source(&e).is_some());
    assert!(e.to_string().contains("a-file"), "{e}");

    let gone = dir.path().join("gone");
    let mut store = DirStore::open(&gone).unwrap();
    fs::remove_dir_all(&gone).unwrap(); // its lock file with it
    for e in [
        store.load_latest().unwrap_err(),
        store.list().unwrap_err(),
        store.save(1, b"x").unwrap_err(),
    ] {
        assert!(
            matches!(&e, CheckpointError::Io { path, .. } if path == &gone),
            "{e:?}"
        );
        assert!(e.to_string().contains("open the store again"), "{e}");
    }
}

// R11.1: the store is a `Send` trait object, so whatever takes checkpoints can own one.
#[test]
fn r11_1_a_store_is_an_object_safe_send_trait() {
    fn owned_by_a_thread(mut store: Box<dyn CheckpointStore>) -> Option<Loaded> {
        std::thread::spawn(move || {
            store.save(1, b"from a thread").unwrap();
            store.load_latest().unwrap()
        })
        .join()
        .unwrap()
    }
    let dir = TestDir::new("object-safe");
    let store = Box::new(DirStore::open(dir.path()).unwrap());
    assert_eq!(owned_by_a_thread(store).unwrap().payload, b"from a thread");
}

// R11.1: one writer per directory. A second store on it, while the first lives, is refused with
// an error naming the lock file (and writes nothing); once the first is dropped it opens, and it
// holds the lock in turn.
#[test]
fn r11_1_a_second_store_on_the_directory_is_refused_while_the_first_lives() {
    let dir = TestDir::new("one-writer");
    let mut first = DirStore::open(dir.path()).unwrap();
    first.save(1, b"one").unwrap();
    let e = DirStore::open(dir.path()).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::InUse { path } if path == &dir.path().join(LOCK_FILE)),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("a checkpoint directory of its own"),
        "{e}"
    );
    assert_eq!(dir.names(), ["checkpoint-00000000000000000001.ckpt"]);

    drop(first);
    let mut second = DirStore::open(dir.path()).unwrap();
    second.save(2, b"two").unwrap();
    assert!(matches!(
        DirStore::open(dir.path()),
        Err(CheckpointError::InUse { .. })
    ));
    assert_eq!(loaded(&second).payload, b"two");
}
