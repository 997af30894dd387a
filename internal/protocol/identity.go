package protocol

// IdentityTokenMetadata is the gRPC metadata key under which an agent
// presents its identity token (its projected Kubernetes service-account
// token) on AgentService.Connect. The value is a credential: never log it.
const IdentityTokenMetadata = "x-meshperf-identity-token"
