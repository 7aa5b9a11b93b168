package s3test

// Pid is the server's process id, for a benchmark that reads its CPU time.
func (s *Server) Pid() int { return s.cmd.Process.Pid }
