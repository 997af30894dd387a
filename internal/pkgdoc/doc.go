// Package pkgdoc holds no code: its test checks that every package of the
// module has a package comment and every exported identifier a doc comment.
package pkgdoc
