// Package readme holds the test that keeps the README's examples true: every code block the
// README introduces with an "<!-- example: path -->" comment must equal the file at path,
// and each such file is run by a test of its own package or client suite.
package readme
