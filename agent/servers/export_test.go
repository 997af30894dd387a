package servers

// Listening exposes listening to the tests: whether a process holds a
// listening TCP socket on a port.
var Listening = listening
