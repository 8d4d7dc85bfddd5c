// Stand-in for Perfetto's frontend bundle: starts the engine worker, as the real one does.
const worker = new Worker('v1.0.0-test/engine_bundle.js');
document.title = 'stand-in UI loaded';
