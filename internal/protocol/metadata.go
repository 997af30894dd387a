package protocol

import "net/netip"

// MetadataService returns the cloud whose metadata service ip is, for the
// metadata services outside the link-local ranges (fd00:ec2::254 of AWS,
// 100.100.100.200 of Alibaba Cloud), or "". The link-local ones
// (169.254.169.254 and the like) are link-local addresses, which the
// callers refuse as such.
func MetadataService(ip netip.Addr) string {
	return metadataIPs[ip.Unmap()]
}

// linkLocalMetadataIP is the metadata service of most clouds (AWS, GCP,
// Azure, OpenStack), a link-local address.
var linkLocalMetadataIP = netip.MustParseAddr("169.254.169.254")

// IsMetadataService reports whether ip is a cloud metadata service:
// 169.254.169.254 or one that MetadataService names. A caller that
// admits some link-local addresses (gossip between link-local nodes)
// still refuses these.
func IsMetadataService(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip == linkLocalMetadataIP || metadataIPs[ip] != ""
}
