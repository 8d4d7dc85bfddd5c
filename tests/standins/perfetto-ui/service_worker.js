// Stand-in for Perfetto's service_worker.js (registered as /service_worker.js?v=<version>).
self.addEventListener('fetch', () => {});
