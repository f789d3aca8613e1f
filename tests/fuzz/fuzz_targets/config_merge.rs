#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcplug::fuzzing::config_merge(data));
