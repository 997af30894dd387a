package registry

import (
	"strings"
	"testing"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestValidateGossipView(t *testing.T) {
	member := func(name string, s measurev1.GossipState) *agentv1.GossipMember {
		return &agentv1.GossipMember{NodeName: name, State: s}
	}
	many := &agentv1.GossipView{}
	for range maxGossipMembers + 1 {
		many.Members = append(many.Members, member("n", measurev1.GossipState_GOSSIP_STATE_ALIVE))
	}
	for _, tt := range []struct {
		name    string
		v       *agentv1.GossipView
		wantErr string // "" for none
	}{
		{"empty", &agentv1.GossipView{}, ""},
		{"every state", &agentv1.GossipView{Members: []*agentv1.GossipMember{
			member("a", measurev1.GossipState_GOSSIP_STATE_ALIVE), member("b.example", measurev1.GossipState_GOSSIP_STATE_SUSPECT),
			member("c", measurev1.GossipState_GOSSIP_STATE_DEAD), member("d", measurev1.GossipState_GOSSIP_STATE_LEFT),
		}}, ""},
		{"too many", many, "at most 5000"},
		{"bad name", &agentv1.GossipView{Members: []*agentv1.GossipMember{member("Node_1", measurev1.GossipState_GOSSIP_STATE_ALIVE)}}, "members[0]"},
		{"unspecified state", &agentv1.GossipView{Members: []*agentv1.GossipMember{member("a", measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED)}}, "state 0 is not a gossip state"},
		{"unknown state", &agentv1.GossipView{Members: []*agentv1.GossipMember{member("a", 9)}}, "state 9 is not a gossip state"},
		{"forgotten in a whole view", &agentv1.GossipView{Members: []*agentv1.GossipMember{member("a", measurev1.GossipState_GOSSIP_STATE_FORGOTTEN)}},
			"members[0] (a): state GOSSIP_STATE_FORGOTTEN only in a delta"},
		{"delta, every state", &agentv1.GossipView{Delta: true, Members: []*agentv1.GossipMember{
			member("a", measurev1.GossipState_GOSSIP_STATE_ALIVE), member("b", measurev1.GossipState_GOSSIP_STATE_FORGOTTEN),
			member("c", measurev1.GossipState_GOSSIP_STATE_DEAD),
		}}, ""},
		{"delta too large", &agentv1.GossipView{Delta: true, Members: many.GetMembers()}, "gossip delta of 5001 members, at most 5000"},
		{"delta, unspecified state", &agentv1.GossipView{Delta: true, Members: []*agentv1.GossipMember{member("a", 0)}}, "gossip delta: members[0] (a): state 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := validateGossipView(tt.v)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v; want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v; want %q", err, tt.wantErr)
			}
		})
	}
}
