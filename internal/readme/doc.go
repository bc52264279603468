// Package readme keeps the README true.
//
// Its tests check that every code block the README introduces with an
// "<!-- example: path -->" comment equals the file at path (each such file is run by a test
// of its own package or client suite), that every block of the "Set up" and "Quick start"
// sections is one the README runner executes or says why not, and that the Node.js version
// the README states is the client's engines and admitted by every runtime package.
//
// Blocks parses the README's marked blocks for those tests and for the runner,
// internal/readme/run, which CI uses to execute the set-up and the quick start verbatim in a
// throwaway copy of the repository.
package readme
