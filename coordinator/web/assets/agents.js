// agents.js: the Agents page: every known node, its agent's state and
// version, what gossip says of it and any partition; polled.
import { api, el, ready, replace, poll } from "./app.js";

export async function renderAgents() {
  poll(async () => {
    const d = await api("agents");
    const t = el("table", { id: "agents", class: "list" },
      el("thead", {}, el("tr", {}, ...["Node", "State", "Scheduling", "Version", "Gossip", "Alive by", "Dead by", "Partition", "Last seen", "Addresses"].map((h) => el("th", { scope: "col" }, h)))));
    const body = el("tbody");
    for (const a of d.agents) {
      body.append(el("tr", { "data-node": a.node, "data-state": a.state },
        el("td", {}, a.node),
        el("td", { class: "state-" + a.state }, a.state),
        el("td", {}, a.node_state + (a.maintenance ? " (cordoned)" : "")),
        el("td", {}, a.version),
        el("td", {}, a.gossip),
        el("td", {}, a.gossip_alive_by.join(", ")),
        el("td", {}, a.gossip_dead_by.join(", ")),
        el("td", { class: a.partition ? "bad" : "" }, a.partition),
        el("td", {}, a.last_seen),
        el("td", {}, a.addresses.join(", "))));
    }
    t.append(body);
    const parts = d.agents.filter((a) => a.partition).length;
    replace(el("h1", {}, "Agents"),
      el("p", { class: "about" }, d.agents.length + " nodes, " + d.agents.filter((a) => a.state === "connected").length + " connected, " + parts + " partitions"),
      el("div", { class: "scroll" }, t));
    ready();
    return d.refresh_seconds;
  }, 10);
}
