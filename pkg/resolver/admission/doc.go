// Package admission bounds what the resolver takes on at once: the
// requests and connections held per Service, per namespace, per client
// address and in all, the bytes they keep, the budget every request in
// flight is charged to, and the wakes each client address may start. It
// only counts: waiting is the hold's, answering a refusal the resolver's.
package admission
