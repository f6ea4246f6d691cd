//! The README shows `examples/quick_start.rs` (a block the README's doc test cannot compile without
//! the `async` feature, so it is marked `ignore` there): this keeps the copy equal to the file,
//! which CI builds and runs (`scripts/test-all.sh`, stage "tokio examples").

#[test]
fn readme_quick_start_is_the_example_file() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../examples/quick_start.rs");
    let start = readme
        .find("```rust,ignore\n")
        .expect("the README has the quick start block")
        + "```rust,ignore\n".len();
    let len = readme[start..]
        .find("```\n")
        .expect("the quick start block ends");
    assert_eq!(
        &readme[start..start + len],
        example,
        "README.md's quick start differs from engine/examples/quick_start.rs: copy the file into it"
    );
}
