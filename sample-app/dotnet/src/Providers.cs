// The providers of joe-elliott/sample-netcore-app, with the same names and signatures, so their
// methods are named as in joe-elliott/netcore-debugging-tools's walkthrough:
//   instance string [sample-netcore-app] sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string)
//   instance int32 [sample-netcore-app] sample_netcore_app.Providers.FibonacciProvider::calculateFibonacciValue(int32)
namespace sample_netcore_app.Providers
{
    public interface IEchoProvider
    {
        string calculateEchoValue(string value);
    }

    public interface IFibonacciProvider
    {
        int calculateFibonacciValue(int value);
    }

    public class EchoProvider : IEchoProvider
    {
        public string calculateEchoValue(string value)
        {
            return value;
        }
    }

    public class FibonacciProvider : IFibonacciProvider
    {
        public int calculateFibonacciValue(int value)
        {
            return calculateFibonacciValueRecursive(value, 0, 0, 1);
        }

        public int calculateFibonacciValueRecursive(int value, int current, int last, int secondToLast)
        {
            if (value == current) return last + secondToLast;
            return calculateFibonacciValueRecursive(value, current + 1, current == 0 ? 0 : last + secondToLast, current == 0 ? 1 : last);
        }
    }
}
