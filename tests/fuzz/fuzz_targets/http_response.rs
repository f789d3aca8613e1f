#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcplug::fuzzing::http_response(data));
