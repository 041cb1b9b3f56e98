//! fileserver.mix unchanged on an ext4 loop mount with `data=writeback`, the
//! journalling mode of seed 004's study: the run completes and its result
//! names the file system and the mount option. The mount lives in a mount
//! namespace of the test's own and is unmounted by the script's trap; the
//! loop device is detached with it (mount -o loop sets autoclear), which the
//! test checks.

mod common;
use common::Env;

#[test]
fn runs_unchanged_on_an_ext4_loop_mount_with_data_writeback() {
    let env = Env::new();
    // A sparse 512 MiB image: room for the quick sweep's trees.
    let body = r#"findmnt -n -o FSTYPE,OPTIONS "$mnt" >&2
"$kscale" --db "$db" run fileserver.mix --quick --param duration=1 --min-trials 2 \
    --max-trials 2 --no-progress --dir "$mnt""#;
    let Some((out, img)) = env.on_fresh_ext4("fs", 512 << 20, "", ",data=writeback", body) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    // Whatever the run did, the image is no longer attached to a loop device.
    common::assert_loop_detached(&img);
    assert!(out.status.success(), "{text}\n{err}");
    assert!(err.contains("data=writeback"), "mount options: {err}");
    assert!(text.contains("File serving"), "{text}");
    // The result's note names the file system and its options.
    let note = text
        .lines()
        .find(|l| l.contains("note: fileserver.mix") && l.contains("ext4"))
        .unwrap_or_else(|| panic!("no file-system note in\n{text}"));
    assert!(note.contains("data=writeback"), "{note}");
    let results = env.results("latest");
    assert!(!results.is_empty());
    for r in results.iter().filter(|r| r["primary"] == true) {
        assert_eq!(r["status"], "done", "{r}");
        assert!(r["mean"].as_f64().is_some_and(|m| m > 0.0), "{r}");
    }
}
