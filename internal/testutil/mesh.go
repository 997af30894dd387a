package testutil

import "strings"

// MeshStateFirstBad is the state string the mesh API shows for n nodes
// when the first node is cut off from the others: row by row, 's' on the
// diagonal (a node and itself), 'f' (failed) in the first row and column,
// 'o' (ok) elsewhere. Cell (i, j) is at i*n+j.
func MeshStateFirstBad(n int) string {
	var b strings.Builder
	for i := range n {
		for j := range n {
			switch {
			case i == j:
				b.WriteByte('s')
			case i == 0 || j == 0:
				b.WriteByte('f')
			default:
				b.WriteByte('o')
			}
		}
	}
	return b.String()
}
