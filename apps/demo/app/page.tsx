import { PaymentsApp } from '@/components/PaymentsApp';

export default function Page() {
  return <PaymentsApp />;
}
