package gossip

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultKeyCheckInterval is how often the key file is looked at for a
// change when Config.KeyCheckInterval is zero.
const DefaultKeyCheckInterval = 10 * time.Second

// MaxKeys bounds the keys of a key file: a rotation needs two at a time.
const MaxKeys = 16

// ErrKeyFile wraps every error of a gossip key file: it cannot be read,
// holds no key, or a line is not a key.
var ErrKeyFile = errors.New("gossip key file")

// LoadKeys reads a gossip key file (ParseKeys).
func LoadKeys(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrKeyFile, file, err)
	}
	return ParseKeys(file, b)
}

// ParseKeys parses the content b of the gossip key file named file: one
// key per line, standard base64 (as `openssl rand -base64 32` prints it)
// of 16, 24 or 32 bytes (AES-128, -192 or -256). Blank lines and lines
// starting with '#' are skipped. The first key is the primary, with which
// memberlist encrypts; every key is tried to decrypt. A key listed twice
// is kept once. Errors wrap ErrKeyFile and name the file and the line, never
// the key.
func ParseKeys(file string, b []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%w %s: line %d: not base64 (want one base64 key of 16, 24 or 32 bytes per line): %w", ErrKeyFile, file, i+1, err)
		}
		if err := memberlist.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("%w %s: line %d: a key of %d bytes: want 16, 24 or 32 (AES-128, -192 or -256)", ErrKeyFile, file, i+1, len(key))
		}
		if slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) }) {
			continue
		}
		if len(keys) == MaxKeys {
			return nil, fmt.Errorf("%w %s: line %d: more than %d keys", ErrKeyFile, file, i+1, MaxKeys)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w %s: no key (want one base64 key of 16, 24 or 32 bytes per line, the primary first)", ErrKeyFile, file)
	}
	return keys, nil
}

// newKeyring is memberlist's keyring of keys, the first the primary.
func newKeyring(keys [][]byte) (*memberlist.Keyring, error) {
	return memberlist.NewKeyring(keys, keys[0])
}

// install makes kr hold exactly keys, keys[0] the primary: the new keys
// are added first and the new primary put in use before the old keys go,
// so that no message is ever encrypted with a key about to be dropped.
func install(kr *memberlist.Keyring, keys [][]byte) error {
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return err
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return err
	}
	for _, old := range kr.GetKeys() {
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, old) }) {
			if err := kr.RemoveKey(old); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchKeys reads Config.KeyFile every KeyCheckInterval (a few hundred
// bytes: cheaper than any watch) and, when its content changed since was,
// installs its keys in the keyring, until g is closed. A file that cannot
// be read or parsed keeps the keys in use, with a warning (once per
// content of the file).
func (g *Gossip) watchKeys(kr *memberlist.Keyring, was []byte) {
	g.every(g.cfg.KeyCheckInterval, func() {
		b, err := os.ReadFile(g.cfg.KeyFile)
		if err == nil && bytes.Equal(b, was) {
			return
		}
		var keys [][]byte
		if err != nil {
			err = fmt.Errorf("%w %s: %w", ErrKeyFile, g.cfg.KeyFile, err)
		} else if keys, err = ParseKeys(g.cfg.KeyFile, b); err == nil {
			err = install(kr, keys)
		}
		if err != nil {
			if was != nil {
				g.log.Warn("gossip key file changed but cannot be used; keeping the keys in use until it changes again", "file", g.cfg.KeyFile, "err", err)
			}
			was = nil // warned: once until it reads again
			return
		}
		was = b
		g.log.Info("gossip keys reloaded", "file", g.cfg.KeyFile, "keys", len(keys))
	})
}
