// Open a Trace Event Format file with catapult's trace-viewer importer (the loader behind chrome://tracing)
// in Node, and print the model it built as one JSON line: what a person would see in that viewer.
//
// usage: node catapult_model.js CATAPULT_DIR SOURCE_PATHS_JSON TRACE.json
// SOURCE_PATHS_JSON: the tracing project's module search paths (tracing_project.TracingProject().source_paths).
'use strict';
const fs = require('fs');
const path = require('path');

const [catapult, sourcePaths, tracePath] = process.argv.slice(2);
require(path.join(catapult, 'catapult_build', 'node_bootstrap.js'));   // defines HTMLImportsLoader
HTMLImportsLoader.addArrayToSourcePath(JSON.parse(fs.readFileSync(sourcePaths, 'utf8')));
// the lean config: the JSON trace-event importer and the model, nothing of the UI
HTMLImportsLoader.loadHTML('/tracing/extras/lean_config.html');
HTMLImportsLoader.loadHTML('/tracing/importer/import.html');

const model = new tr.Model();
new tr.importer.Import(model, new tr.importer.ImportOptions()).importTraces([fs.readFileSync(tracePath, 'utf8')]);

const threads = [];
const counters = {};
for (const proc of Object.values(model.processes)) {
  for (const th of Object.values(proc.threads)) {
    threads.push({pid: proc.pid, tid: th.tid, name: th.name || '', slices: th.sliceGroup.length,
                  async_slices: th.asyncSliceGroup.slices.length});
  }
  for (const c of Object.values(proc.counters)) {
    counters[c.name] = c.numSamples;
  }
}
// model times are in ms; report whole nanoseconds
console.log(JSON.stringify({
  threads, counters,
  flows: model.flowEvents.length,
  bounds_ns: [Math.round(model.bounds.min * 1e6), Math.round(model.bounds.max * 1e6)],
  warnings: model.importWarnings.map((w) => `${w.type}: ${w.message}`),
}));
