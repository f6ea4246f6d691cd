//! Build script: records how this binary was built, so that `env.json` can say it.
//!
//! Cargo hands build scripts the compiler, profile and flags; we pass the ones a reader of a
//! result needs (rustc version, profile, opt-level, debug, target, RUSTFLAGS) to the crate as
//! `HARNESS_BUILD_*` environment variables read with `env!`.

use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| "unknown".into());
    let rustflags = std::env::var("CARGO_ENCODED_RUSTFLAGS")
        .map(|f| f.replace('\u{1f}', " "))
        .unwrap_or_default();
    println!("cargo:rustc-env=HARNESS_BUILD_RUSTC={version}");
    println!("cargo:rustc-env=HARNESS_BUILD_PROFILE={}", var("PROFILE"));
    println!(
        "cargo:rustc-env=HARNESS_BUILD_OPT_LEVEL={}",
        var("OPT_LEVEL")
    );
    println!("cargo:rustc-env=HARNESS_BUILD_DEBUG={}", var("DEBUG"));
    println!("cargo:rustc-env=HARNESS_BUILD_TARGET={}", var("TARGET"));
    println!("cargo:rustc-env=HARNESS_BUILD_RUSTFLAGS={rustflags}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-changed=build.rs");
}
