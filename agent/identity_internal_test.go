package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/meshperf/meshperf/internal/protocol"
)

// TestWithIdentityRereads: each connect reads the token file anew, so
// that the kubelet's rotation reaches the next session; without a file,
// no token goes.
func TestWithIdentityRereads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	a := &Agent{cfg: Config{IdentityTokenFile: file}}
	for _, tok := range []string{"token-one", "token-two"} {
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, err := a.withIdentity(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		md, _ := metadata.FromOutgoingContext(ctx)
		if got := md.Get(protocol.IdentityTokenMetadata); !slices.Equal(got, []string{tok}) {
			t.Errorf("metadata %s = %q, want [%q]", protocol.IdentityTokenMetadata, got, tok)
		}
	}
	ctx, err := (&Agent{}).withIdentity(context.Background())
	if md, _ := metadata.FromOutgoingContext(ctx); err != nil || len(md.Get(protocol.IdentityTokenMetadata)) != 0 {
		t.Errorf("without a file: metadata %v, %v; want none", md, err)
	}
}
