package endpoint

// Resolve exposes Server.resolve to the tests.
func (s *Server) Resolve(pid int) error {
	p, err := s.resolve(pid, -1)
	if err == nil {
		p.close()
	}
	return err
}
