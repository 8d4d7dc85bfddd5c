// Stand-in for Perfetto's engine bundle: compiles trace_processor.wasm by streaming, which
// needs the server to send it as application/wasm.
WebAssembly.compileStreaming(fetch('trace_processor.wasm'));
