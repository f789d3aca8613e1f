#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcplug::fuzzing::url_policy_expand(data));
