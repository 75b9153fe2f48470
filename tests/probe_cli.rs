//! The `fuselm probe` command line, run as a user would.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn fuselm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fuselm"))
}

#[test]
fn probe_json_has_the_typescript_field_names() {
    let out = fuselm()
        .args([
            "probe",
            "--json",
            "--bench",
            "--bench-bytes",
            "4194304",
            "--runs",
            "2",
        ])
        .output()
        .expect("run fuselm");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    for path in [
        "/adapter/isSoftware",
        "/features/shaderF16",
        "/limits/maxStorageBufferBindingSize",
        "/webgpuDefaults/maxComputeWorkgroupStorageSize",
        "/fit/maxTensorBytes",
        "/fit/maxResidentDimF32",
        "/bench/dependentDispatch/median",
        "/bench/submitAndReadback/timer",
        "/bench/readBandwidthManyWorkgroups/samples",
    ] {
        assert!(v.pointer(path).is_some(), "missing {path} in {v}");
    }
}

#[test]
fn no_vulkan_driver_is_a_clear_error_not_a_panic() {
    // Point the Vulkan loader at a driver list that does not exist: no adapter at all.
    let out = fuselm()
        .args(["probe", "--json"])
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .expect("run fuselm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no GPU adapter found"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
