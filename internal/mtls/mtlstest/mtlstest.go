// Package mtlstest makes throwaway certificates for tests of meshperf's
// mutual TLS: a CA, a server certificate for 127.0.0.1 and localhost, a
// client certificate without a node (an API client's), agent certificates
// that name a node (IssueNode), and the wrong ones (another CA's, an
// expired one).
// Only test files import this package.
package mtlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/renameio/v2"

	"github.com/meshperf/meshperf/internal/mtls"
)

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate's PEM file.
	File string
}

// Pair is a leaf certificate's PEM files.
type Pair struct {
	// Cert is the certificate's file.
	Cert string
	// Key is the private key's file.
	Key string
}

// PKI is a set of certificates in one directory.
type PKI struct {
	// CA signs Server, Client and Expired.
	CA *CA
	// OtherCA signs OtherServer and OtherClient: trusted by nobody.
	OtherCA *CA
	// Server is for 127.0.0.1 and localhost, signed by CA.
	Server Pair
	// Client is a client certificate signed by CA.
	Client Pair
	// Expired is a client certificate signed by CA that expired an hour ago.
	Expired Pair
	// OtherServer is for 127.0.0.1 and localhost, signed by OtherCA.
	OtherServer Pair
	// OtherClient is a client certificate signed by OtherCA.
	OtherClient Pair
}

// New writes a PKI into a new temporary directory of t.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	ca := NewCA(t, dir, "meshperf-test-ca")
	other := NewCA(t, dir, "other-ca")
	now := time.Now()
	return &PKI{
		CA:          ca,
		OtherCA:     other,
		Server:      ca.Issue(t, "server", true, now.Add(-time.Hour), now.Add(time.Hour)),
		Client:      ca.Issue(t, "client", false, now.Add(-time.Hour), now.Add(time.Hour)),
		Expired:     ca.Issue(t, "expired", false, now.Add(-2*time.Hour), now.Add(-time.Hour)),
		OtherServer: other.Issue(t, "other-server", true, now.Add(-time.Hour), now.Add(time.Hour)),
		OtherClient: other.Issue(t, "other-client", false, now.Add(-time.Hour), now.Add(time.Hour)),
	}
}

// NewCA makes a self-signed CA named name and writes its certificate to
// dir/name.crt.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".crt")
	writePEM(t, file, "CERTIFICATE", der)
	return &CA{cert: cert, key: key, File: file}
}

// Issue signs a leaf certificate named name, valid from notBefore to
// notAfter, for a server (127.0.0.1, ::1 and localhost) or a client, and
// writes it and its key next to the CA's file.
func (ca *CA) Issue(t testing.TB, name string, server bool, notBefore, notAfter time.Time) Pair {
	t.Helper()
	return ca.issue(t, name, server, notBefore, notAfter, nil)
}

// IssueNode signs a client certificate for node's agent, valid for an
// hour either side of now, with the node URI SAN of mtls.NodeURI, and
// writes it as node-NODE.crt and .key next to the CA's file.
func (ca *CA) IssueNode(t testing.TB, node string) Pair {
	t.Helper()
	return ca.IssueURIs(t, "node-"+node, mtls.NodeURI(node))
}

// IssueURIs signs a client certificate named name with the URI SANs uris
// (none, one or several), valid for an hour either side of now.
func (ca *CA) IssueURIs(t testing.TB, name string, uris ...string) Pair {
	t.Helper()
	var us []*url.URL
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, u)
	}
	now := time.Now()
	return ca.issue(t, name, false, now.Add(-time.Hour), now.Add(time.Hour), us)
}

func (ca *CA) issue(t testing.TB, name string, server bool, notBefore, notAfter time.Time, uris []*url.URL) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         uris,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(ca.File)
	p := Pair{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	writePEM(t, p.Cert, "CERTIFICATE", der)
	writePEM(t, p.Key, "PRIVATE KEY", keyDER)
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Replace puts a copy of src at dst the way a certificate update does:
// written to a temporary file next to dst, then renamed over it, so that a
// reader sees the old file or the new one, never a mix.
func Replace(t testing.TB, dst, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	ReplaceWith(t, dst, b)
}

// ReplaceWith is Replace with the new file's content.
func ReplaceWith(t testing.TB, dst string, content []byte) {
	t.Helper()
	if err := renameio.WriteFile(dst, content, 0o600, renameio.WithTempDir(filepath.Dir(dst))); err != nil {
		t.Fatal(err)
	}
}

// ReplacePair replaces dst's certificate and key with copies of src's.
func ReplacePair(t testing.TB, dst, src Pair) {
	t.Helper()
	Replace(t, dst.Cert, src.Cert)
	Replace(t, dst.Key, src.Key)
}

// Copy copies the certificate and key of p into dir under name.crt and
// name.key, for a test that replaces them later.
func (p Pair) Copy(t testing.TB, dir, name string) Pair {
	t.Helper()
	c := Pair{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	ReplacePair(t, c, p)
	return c
}

// Cert parses the (first) certificate in the PEM file file. It fails t
// if the file cannot be read or holds no certificate.
func Cert(t testing.TB, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c
}

// Serial is the serial number of the (first) certificate in file.
func Serial(t testing.TB, file string) *big.Int {
	t.Helper()
	return Cert(t, file).SerialNumber
}
